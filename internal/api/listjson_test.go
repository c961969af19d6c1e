package api

import (
	"bytes"
	"fmt"
	"net/http/httptest"
	"runtime"
	"testing"

	"github.com/tend-sh/tend/internal/human"
	"github.com/tend-sh/tend/internal/program"
)

// A list encoded in parts on several cores (and derived in parts, as a
// listing is) is byte for byte what one encoder writes, at every size
// around the part boundaries; so is its table.
func TestWriteJSONListSameBytes(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	for _, n := range []int{0, 1, listPart - 1, listPart, listPart + 1, 4 * listPart, 4*listPart + 1, 499, 1000, 1001, 2003, 4567} {
		list := make([]program.Status, n)
		for i := range list {
			list[i] = program.Status{ID: fmt.Sprintf("p%d:0", i), Program: fmt.Sprintf("p%d", i), State: "running", Why: "<up> & \"quoted\""}
		}
		one, many, derived := httptest.NewRecorder(), httptest.NewRecorder(), httptest.NewRecorder()
		writeJSON(one, 200, list)
		writeJSONList(many, 200, list)
		writeStatuses(derived, 200, StatusSlice(list))
		if !bytes.Equal(one.Body.Bytes(), many.Body.Bytes()) || !bytes.Equal(one.Body.Bytes(), derived.Body.Bytes()) {
			t.Fatalf("n=%d: parts differ from one encoding:\n%.200s\n%.200s\n%.200s", n, one.Body.Bytes(), many.Body.Bytes(), derived.Body.Bytes())
		}
		var table bytes.Buffer
		human.TableWith(&table, list, 100, human.TableOptions{Labels: true})
		rec := httptest.NewRecorder()
		if err := writeTable(rec, StatusSlice(list), 100, human.TableOptions{Labels: true}); err != nil || rec.Body.String() != table.String() {
			t.Fatalf("n=%d: the table derived in parts differs (%v):\n%.300s\n%.300s", n, err, rec.Body.String(), table.String())
		}
		if many.Code != 200 || many.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("n=%d: code %d, content type %q", n, many.Code, many.Header().Get("Content-Type"))
		}
	}
}
