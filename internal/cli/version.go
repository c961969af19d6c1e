package cli

import (
	"crypto/sha256"
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
			fmt.Fprintf(e.stdout, "tend %s (%s %s/%s)\n", buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return nil
		}),
	}
}

// buildVersion is Version with a short digest of the running binary,
// such as "v1.2.0+3f2a9c1b04de": two builds of one version (a "dev" build
// and the next) tell apart, which an upgrade's from and to must. The
// binary is read through /proc/self/exe, the file this process runs even
// once another has taken its path.
var buildVersion = sync.OnceValue(func() string {
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		return Version
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return Version
	}
	return Version + "+" + hex.EncodeToString(h.Sum(nil)[:6])
})
