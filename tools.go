//go:build tools

package tools

import (
	_ "github.com/chromedp/chromedp"
	_ "github.com/coreos/go-systemd/v22/daemon"
	_ "github.com/pelletier/go-toml/v2"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/procfs"
	_ "github.com/rogpeppe/go-internal/testscript"
	_ "github.com/spf13/cobra"
	_ "golang.org/x/sys/unix"
)
