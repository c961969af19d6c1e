package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"strings"
)

// ParseEnvFile reads an env_file the way docker compose reads a .env file:
// one KEY=VALUE per line; blank lines and lines starting with # skipped; an
// optional "export " before the key; a value in double quotes takes the
// escapes \n, \t, \", \\ and may not end before its closing quote; a value
// in single quotes is taken as it is; an unquoted value ends at " #" (an
// inline comment) and loses its surrounding blanks. Errors name file and line.
func ParseEnvFile(file string, data []byte) (map[string]string, error) {
	vars := map[string]string{}
	var errs []error
	for i, raw := range bytes.Split(data, []byte("\n")) {
		line := strings.TrimSpace(strings.TrimSuffix(string(raw), "\r"))
		if line == "" || line[0] == '#' {
			continue
		}
		key, val, err := envLine(line)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s:%d: %v", file, i+1, err))
			continue
		}
		vars[key] = val
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return vars, nil
}

func envLine(line string) (key, val string, err error) {
	line = strings.TrimPrefix(line, "export ")
	key, val, ok := strings.Cut(line, "=")
	key = strings.TrimSpace(key)
	if !ok {
		return "", "", fmt.Errorf("%q is not KEY=VALUE", line)
	}
	if !validEnvName(key) {
		return "", "", fmt.Errorf("invalid variable name %q: use letters, digits and '_', not starting with a digit", key)
	}
	val = strings.TrimLeft(val, " \t")
	switch {
	case strings.HasPrefix(val, `"`):
		val, err = doubleQuoted(val[1:])
	case strings.HasPrefix(val, "'"):
		end := strings.IndexByte(val[1:], '\'')
		if end < 0 {
			return "", "", fmt.Errorf("%s: the single quote is not closed", key)
		}
		val = val[1 : 1+end]
	default:
		if i := strings.Index(val, " #"); i >= 0 {
			val = val[:i]
		}
		val = strings.TrimSpace(val)
	}
	if err != nil {
		return "", "", fmt.Errorf("%s: %v", key, err)
	}
	if strings.ContainsRune(val, 0) {
		return "", "", fmt.Errorf("%s: contains a NUL byte", key)
	}
	return key, val, nil
}

// doubleQuoted reads a double-quoted value up to its closing quote.
func doubleQuoted(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), nil
		case '\\':
			if i+1 == len(s) {
				return "", errors.New("the double quote is not closed")
			}
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			default: // \" \\ \$ and anything else: the character itself
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", errors.New("the double quote is not closed")
}

func validEnvName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for _, c := range []byte(s) {
		if !(c == '_' || c == '.' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// unwrapPathError is the errno behind a file error, which already names
// the path in our own message.
func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
