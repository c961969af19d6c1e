package api_test

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/tend-sh/tend/internal/api"
	"github.com/tend-sh/tend/internal/api/apitest"
	"github.com/tend-sh/tend/internal/program"
)

// A listing's written is called once its answer is whole (the daemon then
// refreshes the process samples the answer used), and not for a request
// refused before anything was listed.
func TestListWrittenAfterTheAnswer(t *testing.T) {
	b := apitest.NewBackend(t.TempDir())
	for i := range 400 { // an answer of several parts
		b.Put(program.Status{ID: program.InstanceID(fmt.Sprintf("p%03d", i), 0), Program: fmt.Sprintf("p%03d", i), State: program.StateRunning})
	}
	srv := api.New(b, &apitest.Events{}, api.Options{})
	var rec *httptest.ResponseRecorder
	var calls, seen int
	b.OnListWritten = func() { calls, seen = calls+1, rec.Body.Len() }
	for _, tc := range []struct {
		path  string
		code  int
		calls int
	}{
		{"/v1/status", 200, 1},
		{"/v1/status?view=table&width=100", 200, 1},
		{"/v1/status?agents=1", 200, 1},
		{"/v1/status?view=nope", 400, 0},
		{"/v1/status?view=table&width=0", 400, 0},
	} {
		rec, calls, seen = httptest.NewRecorder(), 0, -1
		srv.Handler().ServeHTTP(rec, httptest.NewRequest("GET", tc.path, nil))
		if rec.Code != tc.code || calls != tc.calls {
			t.Errorf("GET %s: %d, written called %d times; want %d, %d", tc.path, rec.Code, calls, tc.code, tc.calls)
		}
		if calls == 1 && seen != rec.Body.Len() {
			t.Errorf("GET %s: written called with %d of %d bytes answered", tc.path, seen, rec.Body.Len())
		}
	}
}
