package program

// Added answers POST /v1/programs: the program (named by the daemon when
// the body names none) and its instances' ids.
type Added struct {
	Name string   `json:"name"`
	IDs  []string `json:"ids"`
}

// RunEnd is how the run an attached client followed ended (the last line
// of POST /v1/programs?attach=1): its exit as the exited event says it,
// the spawn failure if it never launched, and Status, the exit status a
// shell gives for it (as docker run does).
type RunEnd struct {
	Code        *int    `json:"code"`
	Signal      *string `json:"signal"`
	LikelyCause string  `json:"likely_cause"`
	SpawnError  string  `json:"spawn_error,omitempty"` // the spawn_failed event's error
	Errno       string  `json:"errno,omitempty"`       // and its errno
	Status      int     `json:"status"`
}

// ExitStatus is the status a shell reports for a run that ended so: its
// exit code; 128+N for signal N; for a spawn that never launched, 126
// when the command could not be executed (EACCES, ENOEXEC) and 127
// otherwise (not found, a bad cwd), as sh and docker run say.
func ExitStatus(code *int, signal *string, errno string) int {
	switch {
	case code != nil:
		return *code
	case signal != nil:
		if sig, ok := ParseSignal(*signal); ok {
			return 128 + int(sig)
		}
		return 128
	case errno == "EACCES" || errno == "ENOEXEC":
		return 126
	}
	return 127
}
