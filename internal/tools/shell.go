package tools

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// ShellInput is sandbox_shell's input.
type ShellInput struct {
	Command string `json:"command,omitempty" jsonschema:"a shell command, run with /bin/sh -c in the workspace root (required)"`
	// Cmd is the name sandbox_exec's command had first (commandArg).
	Cmd            string            `json:"cmd,omitempty" jsonschema:"deprecated: the old name of command (give command)"`
	TimeoutS       int               `json:"timeout_s,omitempty" jsonschema:"seconds before the command is killed (default 120, at most 7200)"`
	MaxOutputBytes int               `json:"max_output_bytes,omitempty" jsonschema:"bytes of stdout and of stderr returned (default 16384); longer output keeps its head and tail and the whole of it is kept for sandbox_output"`
	Network        string            `json:"network,omitempty" jsonschema:"the network this command runs with: none (loopback only), limited (the workspace's allow-list, through the HTTP proxy in HTTP_PROXY/HTTPS_PROXY) or default (unrestricted); default: the workspace's policy, and never above it. E.g. limited for npm install, then none for npm test"`
	Env            map[string]string `json:"env,omitempty" jsonschema:"environment variables for this command only, over the workspace's (e.g. {\"CI\": \"1\"}, or a PATH with a tool's directory first)"`
}

// ShellOutput is sandbox_shell's result: a non-zero exit code is a result,
// not a tool error.
type ShellOutput struct {
	ExitCode    int    `json:"exit_code"`
	Stdout      string `json:"stdout"`
	Stderr      string `json:"stderr"`
	TimedOut    bool   `json:"timed_out"`
	Truncated   bool   `json:"truncated"`
	StdoutBytes int64  `json:"stdout_bytes"`
	StderrBytes int64  `json:"stderr_bytes"`
	// OutputID names the whole output kept on the worker when it was cut
	// (page through it with sandbox_output).
	OutputID   string `json:"output_id,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

// commandArg is the shell command of sandbox_shell or sandbox_exec: the
// command field, or cmd, the name sandbox_exec's had first (still
// accepted by both tools, so callers of either name keep working). Errors:
// InvalidArgument when neither holds a command, or both do and differ.
func commandArg(command, cmd string) (string, error) {
	switch {
	case command != "" && cmd != "" && command != cmd:
		return "", invalid("cmd", "give the command once, as command (cmd is its old name)")
	case command == "":
		command = cmd
	}
	if strings.TrimSpace(command) == "" {
		return "", invalid("command", "command is empty")
	}
	return command, nil
}

func (c call) shell(ctx context.Context, in ShellInput) (ShellOutput, string, error) {
	var err error
	if in.Command, err = commandArg(in.Command, in.Cmd); err != nil {
		return ShellOutput{}, "", err
	}
	if in.TimeoutS == 0 {
		in.TimeoutS = DefaultShellTimeoutS
	}
	if in.MaxOutputBytes == 0 {
		in.MaxOutputBytes = DefaultShellOutputBytes
	}
	if in.TimeoutS < 1 || in.TimeoutS > int(sandboxapi.MaxExecTimeout.Seconds()) {
		return ShellOutput{}, "", invalid("timeout_s", "timeout_s must be between 1 and %d", int(sandboxapi.MaxExecTimeout.Seconds()))
	}
	if in.MaxOutputBytes < 1 || in.MaxOutputBytes > sandboxapi.MaxOutputBytesLimit {
		return ShellOutput{}, "", invalid("max_output_bytes", "max_output_bytes must be between 1 and %d", sandboxapi.MaxOutputBytesLimit)
	}
	if err := sandboxapi.ValidateNetwork("network", sandboxapi.Network(in.Network)); err != nil {
		return ShellOutput{}, "", err
	}
	req := sandboxapi.ExecRequest{Cmd: []string{"/bin/sh", "-c", in.Command}, TimeoutS: in.TimeoutS, MaxOutputBytes: in.MaxOutputBytes, KeepOutput: true,
		Network: sandboxapi.Network(in.Network), Env: in.Env}
	var res sandboxapi.ExecResult
	if c.progress == nil {
		res, err = c.s.Exec(ctx, req)
	} else {
		res, err = c.execWithProgress(ctx, req)
	}
	if err != nil {
		return ShellOutput{}, "", err
	}
	out := ShellOutput{ExitCode: res.ExitCode, Stdout: text(res.Stdout), Stderr: text(res.Stderr), TimedOut: res.TimedOut,
		Truncated: res.Truncated, StdoutBytes: res.StdoutBytes, StderrBytes: res.StderrBytes, OutputID: res.OutputID, DurationMS: res.DurationMS}
	return out, shellText(out, in), nil
}

// execWithProgress runs req streaming its output, and reports progress
// about once a second: the seconds elapsed out of the timeout, with the
// newest line of output as the message.
func (c call) execWithProgress(ctx context.Context, req sandboxapi.ExecRequest) (sandboxapi.ExecResult, error) {
	start := time.Now()
	lines := make(chan string, 1)
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		last := ""
		for {
			select {
			case <-done:
				return
			case l := <-lines:
				last = l
			case <-t.C:
				el := time.Since(start).Seconds()
				msg := fmt.Sprintf("running for %.0f s", el)
				if last != "" {
					msg += ": " + last
				}
				c.progress(el, float64(req.TimeoutS), msg)
			}
		}
	}()
	var tail []byte
	return c.s.ExecStream(ctx, req, func(ch sandboxapi.ExecChunk) {
		tail = append(tail, ch.Data...)
		if len(tail) > 4096 {
			tail = tail[len(tail)-4096:]
		}
		if l := lastLine(tail); l != "" {
			select {
			case lines <- l:
			default:
				select { // replace a line not yet taken
				case <-lines:
				default:
				}
				lines <- l
			}
		}
	})
}

func shellText(out ShellOutput, in ShellInput) string {
	var b strings.Builder
	fmt.Fprintf(&b, "exit code %d", out.ExitCode)
	if out.TimedOut {
		fmt.Fprintf(&b, " (timed out after %d s: the command was killed)", in.TimeoutS)
	}
	fmt.Fprintf(&b, ", %d ms\n", out.DurationMS)
	for _, s := range []struct {
		name  string
		text  string
		total int64
	}{{"stdout", out.Stdout, out.StdoutBytes}, {"stderr", out.Stderr, out.StderrBytes}} {
		if s.total == 0 {
			continue
		}
		fmt.Fprintf(&b, "--- %s", s.name)
		if s.total > int64(in.MaxOutputBytes) {
			fmt.Fprintf(&b, " (%d bytes, %d cut from the middle)", s.total, s.total-int64(in.MaxOutputBytes))
		}
		b.WriteString(" ---\n")
		b.WriteString(s.text)
		if !strings.HasSuffix(s.text, "\n") {
			b.WriteByte('\n')
		}
	}
	if out.OutputID != "" {
		fmt.Fprintf(&b, "The whole output is kept: read it with sandbox_output {\"output_id\": %q} (stream stdout or stderr, offset, limit).\n", out.OutputID)
	} else if out.Truncated {
		b.WriteString("The output was cut and could not be kept whole.\n")
	}
	return b.String()
}
