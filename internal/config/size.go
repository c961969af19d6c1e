package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// sizeUnits are the units a size string may end with. Decimal units are
// 1000-based and binary ones 1024-based, as their names say; the match is
// case-insensitive because "512mib" can only mean one thing.
var sizeUnits = []struct {
	name string
	mult int64
}{
	{"B", 1},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
}

// parseSize reads "512MiB", "2GiB", "10MB", "1.5GiB", "1024" (bytes). Single
// letters such as "512M" are rejected: tools disagree on whether M is 10^6 or
// 2^20, and a memory limit off by 5% is a bug nobody sees.
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	if num == "" {
		if strings.HasPrefix(t, "-") {
			return 0, fmt.Errorf("size must not be negative, got %q", s)
		}
		return 0, fmt.Errorf(`invalid size %q (use a number of bytes or units like "512MiB", "2GiB", "10MB")`, s)
	}
	mult := int64(1)
	if unit != "" {
		found := false
		for _, u := range sizeUnits {
			if strings.EqualFold(unit, u.name) {
				mult, found = u.mult, true
				break
			}
		}
		if !found {
			return 0, fmt.Errorf("invalid size %q: unknown unit %q (use B, KB, MB, GB, TB, KiB, MiB, GiB or TiB)", s, unit)
		}
	}
	if n, err := strconv.ParseInt(num, 10, 64); err == nil {
		if n > math.MaxInt64/mult {
			return 0, fmt.Errorf("size %q is too large", s)
		}
		return n * mult, nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf(`invalid size %q (use a number of bytes or units like "512MiB", "2GiB", "10MB")`, s)
	}
	bytes := math.Round(f * float64(mult))
	if bytes >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return int64(bytes), nil
}

// formatSize writes n in the largest binary unit that divides it exactly.
func formatSize(n int64) string {
	for i := len(sizeUnits) - 1; i >= 0; i-- {
		u := sizeUnits[i]
		if u.mult > 1 && u.mult&(u.mult-1) == 0 && n >= u.mult && n%u.mult == 0 {
			return strconv.FormatInt(n/u.mult, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
