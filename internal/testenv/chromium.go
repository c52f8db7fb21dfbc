package testenv

import (
	"os"
	"os/exec"
	"testing"
)

// ChromePathEnv names a Chromium (or Chrome) binary to drive; `make test`
// sets it from hack/chromium.sh, which installs Debian's chromium when missing.
const ChromePathEnv = "CHROME_PATH"

// Chromium returns the browser for browser tests: CHROME_PATH, else
// `chromium` on PATH. Missing fails the test under `make test` and skips
// it otherwise.
func Chromium(t testing.TB) string {
	t.Helper()
	const how = "run hack/chromium.sh (apt-get install chromium) or set CHROME_PATH"
	if p := os.Getenv(ChromePathEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			Missing(t, ChromePathEnv+"="+p, how)
		}
		return p
	}
	p, err := exec.LookPath("chromium")
	if err != nil {
		Missing(t, "chromium", how)
	}
	return p
}
