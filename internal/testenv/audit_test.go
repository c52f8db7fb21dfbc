package testenv

import (
	"strings"
	"testing"
)

// TestAuditRequestsKeepsTheCompletedRequestsOfOneUser: of an audit log,
// only the ResponseComplete events of the user count, in order, and a line
// that is not an event is passed over.
func TestAuditRequestsKeepsTheCompletedRequestsOfOneUser(t *testing.T) {
	const op = "system:serviceaccount:engram-system:engram-operator"
	log := strings.Join([]string{
		`{"stage":"ResponseStarted","verb":"patch","user":{"username":"` + op + `"},"objectRef":{"resource":"pods","namespace":"a","name":"x"}}`,
		`{"stage":"ResponseComplete","verb":"patch","user":{"username":"` + op + `"},"objectRef":{"resource":"deployments","subresource":"status","namespace":"a","name":"x"},"responseStatus":{"code":200},"stageTimestamp":"2026-01-02T03:04:05Z"}`,
		`not json`,
		`{"stage":"ResponseComplete","verb":"create","user":{"username":"admin"},"objectRef":{"resource":"secrets","namespace":"a","name":"y"}}`,
		`{"stage":"ResponseComplete","verb":"create","user":{"username":"` + op + `"},"objectRef":{"resource":"events","namespace":"b","name":"z"},"responseStatus":{"code":201}}`,
	}, "\n")
	evs, err := AuditRequests(strings.NewReader(log), op)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, ev.String())
	}
	want := []string{"patch deployments/status a/x (200)", "create events b/z (201)"}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("got %q, want %q", got, want)
	}
	if evs[0].StageTimestamp.Year() != 2026 {
		t.Errorf("stage timestamp %v", evs[0].StageTimestamp)
	}
}
