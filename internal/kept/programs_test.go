package kept

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tend-sh/tend/internal/program"
	"github.com/tend-sh/tend/internal/testutil"
)

func TestProgramsFile(t *testing.T) {
	d := testutil.StateDir(t)
	k, problems, err := OpenPrograms(d, time.Now())
	if err != nil || problems != nil || len(k.list) != 0 {
		t.Fatalf("no file: %+v %v %v", k, problems, err)
	}
	k.Put("a", []byte("{\n  \"name\": \"a\",\n  \"command\": [\"sleep\", \"1\"]\n}"))
	k.Put("b", []byte(`{"name":"b","shell":"sleep 1"}`))
	k.SetInstances("b", 3)
	k.Put("a", []byte(`{"name":"a","command":["sleep","2"]}`)) // replaced in place
	if ok, _ := k.SetInstances("nope", 1); ok {
		t.Error("scaled a program that is not kept")
	}
	b, _ := d.ReadFile(ProgramsFile)
	if strings.Count(string(b), "\n") != 4 {
		t.Errorf("programs.json is not one entry a line:\n%s", b)
	}
	k2, problems, err := OpenPrograms(d, time.Now())
	if err != nil || problems != nil || len(k2.list) != 2 || k2.list[0].Name != "a" || !strings.Contains(string(k2.list[0].Body), `"2"`) || *k2.list[1].Instances != 3 {
		t.Fatalf("read back: %+v %v %v", k2.list, problems, err)
	}
	specs, problems := k2.Specs(nil, "/", map[string]bool{"a": true}, func(string) (*program.Spec, bool) { return nil, false })
	if len(specs) != 1 || specs[0].Name != "b" || specs[0].Instances != 3 || len(problems) != 1 || !strings.Contains(problems[0], "replaces") {
		t.Errorf("with a config program a: %+v %q", specs, problems)
	}
	if k3, _, _ := OpenPrograms(d, time.Now()); len(k3.list) != 1 {
		t.Errorf("a was not forgotten in the file: %+v", k3.list)
	}

	// A damaged file: set aside, its good lines read, strays left alone.
	lines := strings.Split(string(b), "\n")
	lines[1] = "garbage"
	os.WriteFile(d.Join(ProgramsFile), []byte(strings.Join(lines, "\n")), 0o600)
	k4, problems, err := OpenPrograms(d, time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))
	if err != nil || len(k4.list) != 1 || k4.list[0].Name != "b" || len(problems) != 1 || !k4.LeaveAlone("anything") {
		t.Errorf("damaged: %+v %q %v", k4.list, problems, err)
	}
	if _, err := d.Lstat("programs.json.corrupt-20261202T090000Z"); err != nil {
		t.Errorf("not set aside: %v", err)
	}
	// Until Settle, every start knows programs.json was damaged: a daemon
	// killed before it must not take the good entries for the whole file.
	k5, problems, _ := OpenPrograms(d, time.Now())
	if len(k5.list) != 1 || len(problems) != 1 || !strings.Contains(problems[0], "programs.json.corrupt-20261202T090000Z") || !k5.LeaveAlone("anything") {
		t.Errorf("after setting aside: %+v %q", k5.list, problems)
	}
	// Settle keeps the names of the programs left alone as lost entries,
	// kept aside across restarts until tend add or tend rm.
	lost, err := k5.Settle([]string{"gone", "b", "gone"})
	if err != nil || len(lost) != 1 || lost[0] != "gone" {
		t.Fatalf("settle: %v %v", lost, err)
	}
	k6, problems, _ := OpenPrograms(d, time.Now())
	if problems != nil || k6.LeaveAlone("anything") {
		t.Errorf("after Settle: %q, strays left alone %v", problems, k6.LeaveAlone("anything"))
	}
	specs, problems = k6.Specs(nil, "/", nil, func(string) (*program.Spec, bool) { return nil, false })
	if len(specs) != 1 || specs[0].Name != "b" || len(problems) != 1 || !strings.Contains(problems[0], "program gone (added over the API) was lost") || !k6.LeaveAlone("gone") || k6.LeaveAlone("other") {
		t.Errorf("a lost program: %+v %q", specs, problems)
	}
	if names, unknown := k6.Lost(); len(names) != 1 || names[0] != "gone" || unknown != "" {
		t.Errorf("Lost: %v %q", names, unknown)
	}
	k6.Put("gone", []byte(`{"name":"gone","command":["sleep","3"]}`))
	if names, _ := k6.Lost(); names != nil || k6.LeaveAlone("gone") {
		t.Errorf("tend add did not give gone back: %v", names)
	}
}
