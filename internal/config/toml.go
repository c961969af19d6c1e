package config

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"

	"github.com/pelletier/go-toml/v2/unstable"

	"github.com/tend-sh/tend/internal/program"
)

// parseTOML decodes a whole TOML file. decodeTOML checks the syntax and the
// TOML rules (no key twice) while decoding into plain maps, and knows the
// line of every key; the walk over the maps then checks each key against
// docs/config.md, so one pass reports every problem, each with its line.
func parseTOML(file string, data []byte) (*program.Config, *Defaults, error) {
	abs, dir := locate(file)
	c := &collector{file: file}
	doc, ix, err := decodeTOML(data)
	if err != nil {
		c.addError(tomlError(file, data, err))
		return nil, nil, c.err()
	}
	c.index = ix
	c.unknownKeys(nil, doc, topKeys)
	cfg := &program.Config{File: abs, Daemon: c.daemon(doc, dir)}

	d := &programDecoder{collector: c, baseDir: dir, minInstances: 1}
	defaults := &Defaults{}
	if val, ok := doc["defaults"]; ok {
		if table, isTable := val.(map[string]any); isTable {
			defaults.table = table
			c.unknownKeys([]string{"defaults"}, table, programKeys)
			d.decode("", []string{"defaults"}, defaults.view(), false)
		} else {
			c.wrongType([]string{"defaults"}, "a table", val)
		}
	}
	cfg.Programs = d.programs(doc["program"], defaults)
	if err := c.err(); err != nil {
		return nil, nil, err
	}
	return cfg, defaults, nil
}

// programs decodes every [program.NAME] table, in file order.
func (d *programDecoder) programs(val any, defaults *Defaults) []program.Spec {
	if val == nil {
		return nil
	}
	tables, isTable := val.(map[string]any)
	if !isTable {
		d.wrongType([]string{"program"}, "a table of programs like [program.worker]", val)
		return nil
	}
	// File order: by the line each program first appears on, then by name
	// (an inline table can hold several programs on one line).
	order := slices.Clone(d.index.keys([]string{"program"}))
	slices.SortStableFunc(order, func(a, b kid) int {
		return cmp.Or(cmp.Compare(a.line, b.line), strings.Compare(a.name, b.name))
	})
	names := make([]string, len(order))
	for i, o := range order {
		names[i] = o.name
	}
	specs := make([]program.Spec, 0, len(names))
	for _, name := range names {
		path := []string{"program", name}
		table, isTable := tables[name].(map[string]any)
		if !isTable {
			d.wrongType(path, "a table like [program."+name+"]", tables[name])
			continue
		}
		if !program.ValidName(name) {
			d.add(path, badName(name))
		}
		d.unknownKeys(path, table, programKeys)
		v := append(view{{table: table, path: path}}, defaults.view()...)
		specs = append(specs, d.decode(name, path, v, true))
	}
	return specs
}

func badName(name string) string {
	if name == "all" {
		return `"all" cannot name a program: as an id it means every instance`
	}
	return fmt.Sprintf("invalid program name %q: use lower-case letters, digits, '_', '.' and '-', starting with a letter or digit, at most 63 characters", name)
}

// daemon decodes the [daemon] table.
func (c *collector) daemon(doc map[string]any, dir string) (dm program.Daemon) {
	dm = defaultDaemon()
	defer func() { dm.StateDir = resolve(dir, dm.StateDir) }()
	val, ok := doc["daemon"]
	if !ok {
		return dm
	}
	path := []string{"daemon"}
	table, isTable := val.(map[string]any)
	if !isTable {
		c.wrongType(path, "a table", val)
		return dm
	}
	c.unknownKeys(path, table, daemonKeys)
	v := view{{table: table, path: path}}
	if p, ok := c.setString(v, "state_dir", &dm.StateDir); ok && (dm.StateDir == "" || strings.ContainsRune(dm.StateDir, 0)) {
		c.add(p, "must be a directory path")
		dm.StateDir = defaultStateDir
	}
	if p, ok := c.setString(v, "http", &dm.HTTP); ok && dm.HTTP != "" {
		if _, port, err := net.SplitHostPort(dm.HTTP); err != nil || port == "" {
			c.add(p, fmt.Sprintf(`must be host:port like "127.0.0.1:7070" (or "" for none), got %q`, dm.HTTP))
		}
	}
	tlsCert, _ := c.setString(v, "tls_cert", &dm.TLSCert)
	tlsKey, _ := c.setString(v, "tls_key", &dm.TLSKey)
	switch {
	case (dm.TLSCert == "") != (dm.TLSKey == ""):
		if tlsCert == nil {
			tlsCert = tlsKey
		}
		c.add(tlsCert, "set tls_cert and tls_key together (a PEM certificate and its private key)")
	case dm.TLSCert != "" && dm.HTTP == "":
		c.add(tlsCert, `tls_cert needs http = "host:port" to serve on`)
	case dm.TLSCert != "":
		dm.TLSCert, dm.TLSKey = resolve(dir, dm.TLSCert), resolve(dir, dm.TLSKey)
	}
	c.setBool(v, "subreaper", &dm.Subreaper)
	c.setDuration(v, "audit_retention", &dm.AuditRetention, positive)
	c.setSize(v, "audit_max_size", &dm.AuditMaxSize, minAuditSize)
	if p, ok := c.setString(v, "cgroup", &dm.Cgroup); ok {
		switch {
		case dm.Cgroup == program.CgroupAuto, dm.Cgroup == program.CgroupOff:
		case filepath.IsAbs(dm.Cgroup) && !strings.ContainsRune(dm.Cgroup, 0):
			dm.Cgroup = filepath.Clean(dm.Cgroup)
		default:
			c.add(p, fmt.Sprintf(`must be "auto", "off" or an absolute directory inside a cgroup2 mount, got %q`, dm.Cgroup))
			dm.Cgroup = program.CgroupAuto
		}
	}
	c.setBool(v, "forward_output", &dm.ForwardOutput)
	if p, ok := c.setString(v, "api_add", &dm.APIAdd); ok && dm.APIAdd != program.APIAddAny && dm.APIAdd != program.APIAddUnix {
		c.add(p, fmt.Sprintf(`must be "any" or "unix" (adding programs over the unix socket only), got %q`, dm.APIAdd))
		dm.APIAdd = program.APIAddAny
	}
	return dm
}

// unknownKeys reports every key of table not in known, suggesting the
// nearest known key for a typo.
func (c *collector) unknownKeys(path []string, table map[string]any, known []string) {
	var unknown []string
	for k := range table {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		msg := "unknown key"
		if s := closest(k, known); s != "" {
			msg += fmt.Sprintf(" (did you mean %q?)", s)
		}
		c.add(join(path, k), msg)
	}
}

// tomlError turns a decodeError into one with the file, line and full key.
// A syntax error knows only its line: its key is guessed from the line's
// text.
func tomlError(file string, data []byte, err error) *Error {
	var de *decodeError
	if !errors.As(err, &de) {
		return &Error{File: file, Msg: err.Error(), Err: err}
	}
	path, msg := de.Key, de.Msg
	switch {
	case de.First > 0:
		msg = duplicateMsg(de.Key, de.Full, de.First)
	case path == nil:
		path = guessKey(de.table, lineText(data, de.Line))
	}
	return &Error{File: file, Line: de.Line, Key: strings.Join(path, "."), Msg: msg, Err: err}
}

// duplicateMsg words a key defined twice: key, first defined on line first,
// is defined again or extended by the expression whose key is full.
func duplicateMsg(key, full []string, first int) string {
	switch {
	case len(full) == 2 && len(key) == 2 && full[0] == "program":
		return fmt.Sprintf("program %q is defined twice (first on line %d)", full[1], first)
	case len(key) == len(full):
		return fmt.Sprintf("defined twice (first on line %d)", first)
	default:
		return fmt.Sprintf("already defined on line %d; %s cannot add to it here", first, strings.Join(full, "."))
	}
}

// lineText is the text of a 1-based line.
func lineText(data []byte, line int) []byte {
	for ; line > 1; line-- {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return nil
		}
		data = data[i+1:]
	}
	text, _, _ := bytes.Cut(data, []byte("\n"))
	return text
}

// guessKey names the key of a line that did not parse: what stands before
// its '=' ("x = " with no value), or a table header's name ("[program.x").
func guessKey(table []string, text []byte) []string {
	key, found := []byte(nil), false
	if t := bytes.TrimLeft(bytes.TrimSpace(text), "["); len(t) < len(bytes.TrimSpace(text)) {
		table = nil
		key, _, _ = bytes.Cut(t, []byte("]"))
		key, _, _ = bytes.Cut(key, []byte("#"))
		found = true
	} else {
		key, _, found = bytes.Cut(text, []byte("="))
	}
	if !found {
		return nil
	}
	var p unstable.Parser
	p.Reset(append(slices.Clip(key), " = 0"...))
	if !p.NextExpression() || p.Expression().Kind != unstable.KeyValue {
		return nil
	}
	it := p.Expression().Key()
	path := slices.Clone(table)
	for it.Next() {
		path = append(path, string(it.Node().Data))
	}
	return path
}

// closest is the known key within a small edit distance of k, or "".
func closest(k string, known []string) string {
	best, bestDist := "", 3
	for _, cand := range known {
		if d := editDistance(k, cand); d < bestDist && d < len(cand)/2 {
			best, bestDist = cand, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30 // not a typo; keep the cost bounded
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
