package daemon

import (
	"time"

	"github.com/tend-sh/tend/internal/kept"
	"github.com/tend-sh/tend/internal/program"
)

// openIntents reads the intent record an earlier daemon left (it stopped
// uncleanly: killed, crashed, or upgraded in place), for the manager,
// whose instances take it up as they are made (SetIntents), and goes on
// keeping it. A damaged record is set aside and what its journal (or its
// intact lines) holds is restored, with one line that names the file and
// says which (docs/daemon.md#damaged-records).
func (d *daemon) openIntents() (map[string]kept.Intent, error) {
	loaded, err := kept.LoadIntents(d.state.Root, time.Now())
	if err != nil {
		return nil, err
	}
	if loaded.Problem != "" {
		d.note("%s", loaded.Problem)
	}
	recs := make([]kept.Intent, 0, len(loaded.Records))
	for _, r := range loaded.Records {
		recs = append(recs, r)
	}
	d.intents = kept.OpenIntents(d.state.Root, recs)
	return loaded.Records, nil
}

// settleIntents drops the records no instance or program took up: of
// programs the config no longer has. Those of programs that may yet come
// back (kept aside, or possibly in a damaged programs.json) are kept and
// offered again, as their runs are; it returns the names of those this
// daemon does not have.
func (d *daemon) settleIntents() (alone []string) {
	later := map[string]kept.Intent{}
	for id, r := range d.mgr.UnclaimedIntents() {
		name := id
		if n, _, ok := program.SplitID(id); ok {
			name = n
		}
		if d.kept.LeaveAlone(name) {
			if _, ok := d.mgr.Spec(name); !ok {
				alone = append(alone, name)
			}
			later[id] = r
			continue
		}
		d.intents.Delete(id)
	}
	if len(later) > 0 {
		d.mgr.SetIntents(later)
	}
	d.intents.Sync()
	return alone
}
