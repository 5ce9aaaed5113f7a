package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// Exit codes of sandboxctl (README "Walkthrough", "Exit codes"): exec, proc
// read --follow and proc attach exit with the process's code, 130 when
// interrupted; the rest by exitCode.
const (
	exitOK      = 0
	exitError   = 1
	exitInvalid = 2
)

// exitCodeError makes Main exit with code without printing anything more.
type exitCodeError struct{ code int }

func (e exitCodeError) Error() string { return "exit " + strconv.Itoa(e.code) }

// errUsage is the kind of a command line sandboxctl refused before running
// anything (usageError); its --json error type is "UsageError".
var errUsage = errors.New("usage error")

// usageError is a command line refused before the command ran: a flag pflag
// could not parse (flags), or what cobra checks next — the command's name,
// its number of arguments, its required flags.
type usageError struct {
	error
	flags bool // raised while parsing the flags, before --json itself was read
}

func (e usageError) Unwrap() error { return e.error }

// Is makes errors.Is(err, errUsage) hold for a usageError.
func (e usageError) Is(target error) bool { return target == errUsage }

// exitCodes maps error kinds to exit codes: the first row whose kind the
// error wraps (errors.Is, so a sub-kind matches its kind's row) decides; an
// error matching no row exits exitError. README "Walkthrough" documents it.
var exitCodes = []struct {
	kind error
	code int
}{
	{sandboxapi.ErrInvalidArgument, exitInvalid},      // bad flags, ids, refs, arguments
	{sandboxapi.ErrInvalidWorkspacePath, exitInvalid}, // and its sub-kind FileNotFound: a path that names no file
	{errUsage, exitInvalid},                           // unknown command or flag, wrong argument count, required flag not set
}

// exitCode is the exit code for err (from RunE, or cobra's): 0 for nil, the
// code of an exitCodeError, else the exitCodes row of its kind, else
// exitError (any other error: a failed call, an unreachable server).
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var ec exitCodeError
	if errors.As(err, &ec) {
		return ec.code
	}
	for _, row := range exitCodes {
		if errors.Is(err, row.kind) {
			return row.code
		}
	}
	return exitError
}

// flagError is the root's flag error function: a usageError (flags), with
// the way to pass an argument that starts with '-' (a file "-n", a search
// for "-x") added to an unknown flag's error, and a flag value's typed
// error (a bad --timeout) keeping its kind with pflag's words around it.
func flagError(_ *cobra.Command, err error) error {
	var unknown *pflag.NotExistError
	if errors.As(err, &unknown) {
		err = fmt.Errorf("%w (an argument that starts with '-' goes after --, e.g. `sandboxctl exec WS -- ls -la`; "+
			"paths and search patterns may not start with '-': name the file ./-n, search for \\-x)", err)
	}
	var bad *pflag.InvalidValueError
	if errors.As(err, &bad) {
		if k := sandboxapi.KindOf(bad.Unwrap()); k != nil {
			err = sandboxapi.Errorf(k, "invalid argument %q for %q flag: %s", bad.GetValue(), flagName(bad.GetFlag()), sandboxapi.Message(bad.Unwrap()))
		}
	}
	return usageError{error: err, flags: true}
}

// flagName names f as pflag's InvalidValueError does: "-n, --max-count", or
// "--timeout" for a flag without a (non-deprecated) shorthand.
func flagName(f *pflag.Flag) string {
	if f.Shorthand != "" && f.ShorthandDeprecated == "" {
		return "-" + f.Shorthand + ", --" + f.Name
	}
	return "--" + f.Name
}

// wantsJSON reports whether args hold --json before any "--"; used only for
// an error raised while parsing the flags (where a value that happens to be
// "--json", as in `commit WS -m --json`, cannot be told apart).
func wantsJSON(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "--json", "--json=true", "--json=1":
			return true
		}
	}
	return false
}
