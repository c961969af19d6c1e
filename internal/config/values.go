package config

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/tend-sh/tend/internal/program"
)

// The typed getters below read one key from a view. A key no layer sets
// leaves dst at its default; a key of the wrong type or with a bad value is
// reported and also leaves dst alone, so decoding goes on and finds every
// problem in one pass.

// typeName names a decoded value's type for messages.
func (c *collector) typeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case []any:
		return "an array"
	case map[string]any:
		if c.invalid {
			return "an object"
		}
		return "a table"
	case nil:
		return "null"
	default:
		return "a date/time"
	}
}

func (c *collector) wrongType(path []string, want string, got any) {
	c.add(path, "must be "+want+", not "+c.typeName(got))
}

func (c *collector) setString(v view, key string, dst *string) ([]string, bool) {
	val, path, ok := v.lookup(key)
	if !ok {
		return nil, false
	}
	s, isString := val.(string)
	if !isString {
		c.wrongType(path, "a string", val)
		return path, false
	}
	*dst = s
	return path, true
}

func (c *collector) setBool(v view, key string, dst *bool) {
	val, path, ok := v.lookup(key)
	if !ok {
		return
	}
	b, isBool := val.(bool)
	if !isBool {
		c.wrongType(path, "true or false", val)
		return
	}
	*dst = b
}

// setInt reads an integer in [lo, hi].
func (c *collector) setInt(v view, key string, dst *int, lo, hi int) {
	val, path, ok := v.lookup(key)
	if !ok {
		return
	}
	n, isInt := val.(int64)
	if !isInt {
		c.wrongType(path, "an integer", val)
		return
	}
	if n < int64(lo) || n > int64(hi) {
		c.add(path, rangeMsg(n, lo, hi))
		return
	}
	*dst = int(n)
}

func rangeMsg(n int64, lo, hi int) string {
	if hi == maxInt {
		return fmt.Sprintf("must be at least %d, got %d", lo, n)
	}
	return fmt.Sprintf("must be between %d and %d, got %d", lo, hi, n)
}

const maxInt = int(^uint(0) >> 1)

func (c *collector) setFloat(v view, key string, dst *float64, lo, hi float64) {
	val, path, ok := v.lookup(key)
	if !ok {
		return
	}
	var f float64
	switch x := val.(type) {
	case float64:
		f = x
	case int64:
		f = float64(x)
	default:
		c.wrongType(path, "a number", val)
		return
	}
	if !(f >= lo && f <= hi) { // also catches NaN
		c.add(path, fmt.Sprintf("must be between %g and %g, got %g", lo, hi, f))
		return
	}
	*dst = f
}

// durationRule says which durations a key accepts.
type durationRule int

const (
	orZero   durationRule = iota // >= 0; "" means 0 (off)
	positive                     // > 0
)

func (c *collector) setDuration(v view, key string, dst *time.Duration, rule durationRule) {
	val, path, ok := v.lookup(key)
	if !ok {
		return
	}
	s, isString := val.(string)
	if !isString {
		c.wrongType(path, `a duration string like "10s"`, val)
		return
	}
	if s == "" && rule == orZero {
		*dst = 0
		return
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		c.add(path, fmt.Sprintf(`invalid duration %q (use Go syntax such as "1.5s", "10m", "2h")`, s))
	case d < 0:
		c.add(path, fmt.Sprintf("must not be negative, got %q", s))
	case d == 0 && rule == positive:
		c.add(path, fmt.Sprintf("must be greater than zero, got %q", s))
	default:
		*dst = d
	}
}

// setSize reads a size in bytes, at least lo; "" means 0 when lo is 0.
func (c *collector) setSize(v view, key string, dst *int64, lo int64) {
	val, path, ok := v.lookup(key)
	if !ok {
		return
	}
	var n int64
	switch x := val.(type) {
	case int64:
		n = x
	case string:
		if x == "" && lo == 0 {
			*dst = 0
			return
		}
		var err error
		if n, err = parseSize(x); err != nil {
			c.add(path, err.Error())
			return
		}
	default:
		c.wrongType(path, `a size like "512MiB" or a number of bytes`, val)
		return
	}
	switch {
	case n < 0:
		c.add(path, fmt.Sprintf("must not be negative, got %d", n))
	case n < lo:
		c.add(path, fmt.Sprintf("must be at least %s, got %d bytes", formatSize(lo), n))
	default:
		*dst = n
	}
}

// setArgv reads a non-empty array of strings whose first element is not empty.
func (c *collector) setArgv(v view, key string, dst *[]string) {
	val, path, ok := v.lookup(key)
	if !ok {
		return
	}
	list, isList := val.([]any)
	if !isList {
		c.wrongType(path, `an array of strings like ["python3", "worker.py"]`, val)
		return
	}
	if len(list) == 0 {
		c.add(path, "must not be empty")
		return
	}
	argv := make([]string, len(list))
	for i, x := range list {
		s, isString := x.(string)
		if !isString {
			c.add(path, fmt.Sprintf("element %d must be a string, not %s", i, c.typeName(x)))
			return
		}
		if strings.ContainsRune(s, 0) {
			c.add(path, fmt.Sprintf("element %d contains a NUL byte", i))
			return
		}
		argv[i] = s
	}
	if strings.TrimSpace(argv[0]) == "" {
		c.add(path, "the program to run (element 0) must not be empty")
		return
	}
	*dst = argv
}

// setCodes reads an array of exit codes, each in 0..255.
func (c *collector) setCodes(v view, key string, dst *[]int) {
	val, path, ok := v.lookup(key)
	if !ok {
		return
	}
	list, isList := val.([]any)
	if !isList {
		c.wrongType(path, "an array of exit codes like [0, 3]", val)
		return
	}
	codes := make([]int, 0, len(list))
	for _, x := range list {
		n, isInt := x.(int64)
		if !isInt {
			c.add(path, "exit codes must be integers, not "+c.typeName(x))
			return
		}
		if n < 0 || n > 255 {
			c.add(path, fmt.Sprintf("exit code %d is outside 0..255", n))
			return
		}
		codes = append(codes, int(n))
	}
	*dst = codes
}

// setEnv reads a table of string values with names usable in an environment.
func (c *collector) setEnv(v view, key string, dst *map[string]string) {
	val, path, ok := v.lookup(key)
	if !ok {
		return
	}
	table, isTable := val.(map[string]any)
	if !isTable {
		c.wrongType(path, `a table of strings like { QUEUE = "default" }`, val)
		return
	}
	env := make(map[string]string, len(table))
	bad := false
	for _, name := range sortedKeys(table) {
		s, isString := table[name].(string)
		switch {
		case name == "" || strings.ContainsAny(name, "=\x00"):
			c.add(path, fmt.Sprintf("invalid variable name %q: must be non-empty, without '='", name))
			bad = true
		case !isString:
			c.wrongType(join(path, name), "a string", table[name])
			bad = true
		case strings.ContainsRune(s, 0):
			c.add(join(path, name), "contains a NUL byte")
			bad = true
		default:
			env[name] = s
		}
	}
	if !bad {
		*dst = env
	}
}

func (c *collector) setEnum(v view, key string, dst *string, allowed ...string) {
	var s string
	path, ok := c.setString(v, key, &s)
	if !ok {
		return
	}
	for _, a := range allowed {
		if s == a {
			*dst = s
			return
		}
	}
	c.add(path, fmt.Sprintf("must be one of %s, got %q", strings.Join(allowed, ", "), s))
}

// setSignal reads a signal by name ("TERM", "SIGTERM") or number.
func (c *collector) setSignal(v view, key string, dst *syscall.Signal) {
	val, path, ok := v.lookup(key)
	if !ok {
		return
	}
	var s string
	switch x := val.(type) {
	case string:
		s = x
	case int64:
		s = strconv.FormatInt(x, 10)
	default:
		c.wrongType(path, `a signal name like "TERM"`, val)
		return
	}
	sig, valid := program.ParseSignal(s)
	if !valid {
		c.add(path, fmt.Sprintf("unknown signal %q (use a name like \"TERM\", \"INT\", \"QUIT\")", s))
		return
	}
	*dst = sig
}
