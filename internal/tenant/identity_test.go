package tenant

import (
	"strings"
	"testing"
)

// TestServerIdentitySame: one server's one database is the same whatever
// its name (a rename keeps the OID); another system identifier or another
// database OID is another home; without a system identifier on either side
// the OID alone decides.
func TestServerIdentitySame(t *testing.T) {
	home := ServerIdentity{System: "7712691670320512579", Database: "engram", DatabaseOID: 16384}
	cases := []struct {
		name  string
		other ServerIdentity
		same  bool
	}{
		{"the same", home, true},
		{"renamed database", ServerIdentity{System: home.System, Database: "memories", DatabaseOID: 16384}, true},
		{"another server, same OID", ServerIdentity{System: "7712691670320512580", Database: "engram", DatabaseOID: 16384}, false},
		{"another database of the server", ServerIdentity{System: home.System, Database: "other", DatabaseOID: 16390}, false},
		{"system identifier not readable, same OID", ServerIdentity{Database: "engram", DatabaseOID: 16384}, true},
		{"system identifier not readable, another OID", ServerIdentity{Database: "engram", DatabaseOID: 24576}, false},
	}
	for _, c := range cases {
		if got := home.Same(c.other); got != c.same {
			t.Errorf("%s: Same = %v, want %v", c.name, got, c.same)
		}
		if got := c.other.Same(home); got != c.same {
			t.Errorf("%s (reversed): Same = %v, want %v", c.name, got, c.same)
		}
	}
}

// TestServerIdentityCheck: an identity no PostgreSQL answers (a server the
// tenant runs may answer anything) is refused before it reaches status or
// a message (hostile review of this session, LOW 5).
func TestServerIdentityCheck(t *testing.T) {
	for _, c := range []struct {
		id ServerIdentity
		ok bool
	}{
		{ServerIdentity{System: "7444096201546123456", Database: "engram", DatabaseOID: 16384}, true},
		{ServerIdentity{Database: "engram", DatabaseOID: 16384}, true}, // not readable
		{ServerIdentity{System: strings.Repeat("9", 1<<20), Database: "engram"}, false},
		{ServerIdentity{System: "abc", Database: "engram"}, false},
		{ServerIdentity{System: "1", Database: strings.Repeat("d", 64)}, false},
	} {
		if err := c.id.check(); (err == nil) != c.ok {
			t.Errorf("check(%.40s…, %d bytes of name) = %v, want ok %v", c.id.System, len(c.id.Database), err, c.ok)
		}
	}
}
