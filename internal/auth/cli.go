package auth

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

const cliUsage = `Usage:
  manager token mint --signing-key-file FILE --subject S [--owner O] [--ttl 1h] [--role agent]
      print a signed token (the key is the signing-key of the <runtime>-api-token Secret)
  manager token new [--role app] [--owner O] [--name N]
      print a new line for the tokens key of the <runtime>-api-token Secret
`

// Main is `manager token`: it mints signed tokens and generates static
// ones. It returns the exit code: 0 done, 1 failed, 2 bad usage.
func Main(args []string, stdout, stderr io.Writer, now func() time.Time) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, cliUsage)
		return 2
	}
	var err error
	switch args[0] {
	case "mint":
		err = mintCommand(args[1:], stdout, stderr, now())
	case "new":
		err = newCommand(args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, cliUsage)
		return 0
	default:
		err = fmt.Errorf("%w: unknown command %q", errUsage, args[0])
	}
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "manager token: %v\n%s", err, cliUsage)
		return 2
	default:
		fmt.Fprintf(stderr, "manager token: %v\n", err)
		return 1
	}
}

var errUsage = errors.New("bad usage")

func mintCommand(args []string, stdout, stderr io.Writer, now time.Time) error {
	fs := flag.NewFlagSet("manager token mint", flag.ContinueOnError)
	fs.SetOutput(stderr)
	keyFile := fs.String("signing-key-file", "", "file holding the signing key (base64 of 32 random bytes; the first key of the file mints)")
	owner := fs.String("owner", "", "the one owner the token may act for (empty: any owner)")
	subject := fs.String("subject", "", "identity recorded in history for the token's writes, e.g. support-bot/alice")
	ttl := fs.Duration("ttl", time.Hour, "lifetime of the token, at most 24h")
	role := fs.String("role", string(RoleAgent), "agent or app")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *keyFile == "" || *subject == "" {
		return fmt.Errorf("%w: --signing-key-file and --subject are required", errUsage)
	}
	raw, err := os.ReadFile(*keyFile)
	if err != nil {
		return fmt.Errorf("reading the signing key: %w", err)
	}
	keys, skipped := ParseSigningKeys(raw)
	if keys.Len() == 0 {
		return fmt.Errorf("%s holds no usable signing key%s", *keyFile, skippedNote(skipped))
	}
	tok, err := Mint(keys.MintKey(), Claims{Role: Role(*role), Owner: *owner, Subject: *subject,
		IssuedAt: now.Unix(), ExpiresAt: now.Add(*ttl).Unix()})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, tok)
	return nil
}

func newCommand(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("manager token new", flag.ContinueOnError)
	fs.SetOutput(stderr)
	role := fs.String("role", string(RoleApp), "admin, app or agent")
	owner := fs.String("owner", "", "bind the token to this owner (empty: any owner)")
	name := fs.String("name", "", "identity recorded in history (empty: token: and a digest prefix)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	r, err := ParseRole(*role)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *owner != "" {
		if err := checkOwner(*owner); err != nil {
			return fmt.Errorf("%w: --owner %v", errUsage, err)
		}
	}
	if *name != "" {
		if err := checkIdentity(*name); err != nil {
			return fmt.Errorf("%w: --name %v", errUsage, err)
		}
	}
	tok, err := NewToken()
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, TokenLine(tok, r, *owner, *name))
	return nil
}

func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	return nil
}

func skippedNote(skipped []Skipped) string {
	if len(skipped) == 0 {
		return ""
	}
	return fmt.Sprintf(" (line %d: %s)", skipped[0].Line, skipped[0].Reason)
}
