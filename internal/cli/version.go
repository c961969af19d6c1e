package cli

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"

	"github.com/spf13/cobra"
)

func (e *env) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print tend's version",
		Args:  cobra.NoArgs,
		RunE: e.run(func(cmd *cobra.Command, args []string) error {
			fmt.Fprintf(e.stdout, "tend %s (%s %s/%s)\n", e.version(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		}),
	}
}

// buildVersion is Version with a short digest of the running binary,
// such as "v1.2.0+3f2a9c1b04de": two builds of one version (a "dev" build
// and the next) tell apart, which an upgrade's from and to must. The
// digest is of the Go build ID the linker wrote into the binary (a hash of
// its content) and the file's size (a binary changed after the link,
// stripped or appended to, tells apart too): a stat and the binary's first
// page, not a hash of twenty megabytes, which cost tend version 15 ms
// (docs/cli.md#what-one-exec-costs). The binary is read through
// /proc/self/exe, the file this process runs even once another has taken
// its path. A binary without a build ID is hashed whole.
var buildVersion = sync.OnceValue(func() string { return versionOf("/proc/self/exe") })

// version is tend's version as tend version prints it: the whole tend's,
// the one tend up runs and tend upgrade re-executes. The lean CLI has no
// daemon of its own and names the tend-daemon beside it
// (docs/cli.md#two-files).
func (e *env) version() string {
	if e.parts.Daemon == nil {
		if p, err := wholeTend(); err == nil {
			return versionOf(p)
		}
	}
	return buildVersion()
}

// versionOf is Version with the digest of the binary at path.
func versionOf(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return Version
	}
	defer f.Close()
	h := sha256.New()
	if id, size, ok := goBuildID(f); ok {
		fmt.Fprintf(h, "%s\n%d\n", id, size)
	} else if _, err := f.Seek(0, io.SeekStart); err != nil {
		return Version
	} else if _, err := io.Copy(h, f); err != nil {
		return Version
	}
	return Version + "+" + hex.EncodeToString(h.Sum(nil)[:6])
}

// goBuildID reads the Go build ID of the ELF binary f from its
// .note.go.buildid (name "Go", type 4), which the linker puts in the
// binary's first page, and f's size.
func goBuildID(f *os.File) (id []byte, size int64, ok bool) {
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, false
	}
	head := make([]byte, 16<<10)
	n, _ := io.ReadFull(f, head)
	id = noteGoBuildID(head[:n])
	return id, fi.Size(), id != nil
}

// noteGoBuildID finds the Go build ID note in the start of an ELF file
// (little-endian): namesz 4, descsz, type 4, "Go\x00\x00", then descsz
// bytes of ID. nil: none there.
func noteGoBuildID(head []byte) []byte {
	if !bytes.HasPrefix(head, []byte("\x7fELF")) {
		return nil
	}
	tag := []byte("\x04\x00\x00\x00Go\x00\x00") // type 4, then the name
	for off := 0; ; {
		i := bytes.Index(head[off:], tag)
		if i < 0 {
			return nil
		}
		i += off
		off = i + 1
		if i < 8 || binary.LittleEndian.Uint32(head[i-8:]) != 4 {
			continue // not a note's header: namesz is 4
		}
		descsz := int(binary.LittleEndian.Uint32(head[i-4:]))
		start := i + len(tag)
		if descsz == 0 || descsz > 1024 || start+descsz > len(head) {
			return nil
		}
		return head[start : start+descsz]
	}
}
