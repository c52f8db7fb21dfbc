package naming

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// hashSuffixBytes is the part of SHA-256 a cut name ends with (8 hex digits).
const hashSuffixBytes = 4

// ShortHash is the first n bytes of SHA-256 of s, in hex.
func ShortHash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:n])
}

// SHA256Hex is the whole SHA-256 of b, in hex.
func SHA256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Fit returns name when it has at most max bytes; else its first bytes,
// without trailing characters of trim, then sep and 8 hex digits of the
// SHA-256 of the whole name, max bytes at most. The hash keeps two long
// names that share their beginning apart.
func Fit(name string, max int, sep, trim string) string {
	if len(name) <= max {
		return name
	}
	suffix := sep + ShortHash(name, hashSuffixBytes)
	return strings.TrimRight(name[:max-len(suffix)], trim) + suffix
}

// FitDNSName is Fit for Kubernetes object names: "-" before the hash, and
// no "-" or "." left at the end of the cut part.
func FitDNSName(name string, max int) string { return Fit(name, max, "-", "-.") }
