package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/sandboxcore/sandboxcore/sandboxclient"
)

// The one shape of a command body: find the session (or the client), make
// one call, print its result as text or, with --json, as indented JSON.

// runSession finds the session of workspace wsID, calls call on it with the
// command's context and prints the result with printResult. A command that
// validates its arguments does so before runSession, so bad input sends
// nothing. Errors: the connection's (connectError: InvalidArgument for a bad
// setting, SandboxUnavailable for an unreachable server), InvalidArgument for
// a malformed workspace id (sandboxclient.Client.Session, before call), then
// call's and text's, unchanged.
func runSession[Out any](c *cli, cmd *cobra.Command, wsID string,
	call func(context.Context, *sandboxclient.Session) (Out, error), text func(Out) error) error {
	return runClient(c, cmd, func(ctx context.Context, sc *sandboxclient.Client) (Out, error) {
		s, err := sc.Session(wsID)
		if err != nil {
			var zero Out
			return zero, err
		}
		return call(ctx, s)
	}, text)
}

// runClient is runSession for a command that is not about one workspace
// (acquire, list, eviction, runtimes gc, cleanup): call gets the client.
// Errors: the connection's (connectError), then call's and text's.
func runClient[Out any](c *cli, cmd *cobra.Command,
	call func(context.Context, *sandboxclient.Client) (Out, error), text func(Out) error) error {
	sc, err := c.client(cmd.Context())
	if err != nil {
		return err
	}
	out, err := call(cmd.Context(), sc)
	if err != nil {
		return err
	}
	return printResult(c, out, text)
}

// printResult prints out as indented JSON on stdout with --json (README
// "Walkthrough": byte fields are base64 there), else with text; a nil text
// prints nothing. The error is the encoder's or text's. An exit status
// decided by the result (search's 1 when nothing matched, merge's when a
// source failed) is the caller's, after this, so that --json keeps it.
func printResult[Out any](c *cli, out Out, text func(Out) error) error {
	if c.asJSON {
		return c.printJSON(out)
	}
	if text == nil {
		return nil
	}
	return text(out)
}
