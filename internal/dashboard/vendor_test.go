package dashboard_test

import (
	"crypto/sha512"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestVendoredXterm checks the files scripts/vendor-xterm.sh vendored:
// each one the manifest lists is there, unchanged, and the licences come
// with them.
func TestVendoredXterm(t *testing.T) {
	dir := filepath.Join("static", "vendor", "xterm")
	raw, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Packages []struct {
			Name, Version, Integrity, License string
			Files                             map[string]string
		}
		SHA512 map[string]string
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"@xterm/xterm": "6.0.0", "@xterm/addon-fit": "0.11.0"}
	listed := map[string]bool{"manifest.json": true}
	for _, p := range m.Packages {
		if want[p.Name] != p.Version || !strings.HasPrefix(p.Integrity, "sha512-") || p.License != "MIT" {
			t.Errorf("package %s %s (%s, %s)", p.Name, p.Version, p.Integrity, p.License)
		}
		delete(want, p.Name)
		licence := false
		for f := range p.Files {
			listed[f] = true
			licence = licence || strings.HasPrefix(f, "LICENSE")
		}
		if !licence {
			t.Errorf("%s comes without its licence", p.Name)
		}
	}
	if len(want) != 0 {
		t.Errorf("packages missing: %v", want)
	}
	for f := range listed {
		if f == "manifest.json" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Error(err)
			continue
		}
		sum := sha512.Sum512(data)
		if got := hex.EncodeToString(sum[:]); got != m.SHA512[f] {
			t.Errorf("%s: sha512 %s, the manifest says %s", f, got, m.SHA512[f])
		}
		if strings.HasPrefix(f, "LICENSE") && !strings.Contains(string(data), "Permission is hereby granted") {
			t.Errorf("%s is not the MIT licence", f)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !listed[e.Name()] {
			t.Errorf("%s is not in the manifest", e.Name())
		}
	}
	// Embedded in the binary, served like the other assets.
	for _, f := range []string{"xterm.js", "xterm.css", "addon-fit.js"} {
		if res := get(t, "/ui/vendor/xterm/"+f); res.StatusCode != 200 {
			t.Errorf("/ui/vendor/xterm/%s: %d", f, res.StatusCode)
		}
	}
}
