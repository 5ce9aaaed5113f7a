package wire

import (
	"testing"

	"go.temporal.io/sdk/converter"

	"github.com/sandboxcore/sandboxcore/sandboxapi"
)

// BenchmarkExecResultInWorkflow: what the session's workflow code does
// with an exec's result of 600 KB (512 KiB of stdout, 88 KiB of stderr) per
// update. typed is the raw baseline, the work before exec-raw-result:
// decode the activity's typed result, encode the update's ExecResult.
// head is what it does now: read the ExecHead from the payload's metadata
// (the payload itself goes back untouched). parse-whole is the pass-through
// that still parses the JSON to find the head (why the head rides in the
// metadata). docs/BENCHMARKS.md "Exec results in workflow code".
func BenchmarkExecResultInWorkflow(b *testing.B) {
	out := make([]byte, 512<<10)
	for i := range out {
		out[i] = byte('a' + i%26)
	}
	res := ExecStartResult{Done: true, Result: sandboxapi.ExecResult{ExitCode: 3, Stdout: out, Stderr: out[:88<<10], StdoutBytes: 512 << 10, StderrBytes: 88 << 10}}
	dc := converter.GetDefaultDataConverter()
	typed, err := ExecStartPayload(res, false)
	if err != nil {
		b.Fatal(err)
	}
	raw, err := ExecStartPayload(res, true)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("typed", func(b *testing.B) {
		for b.Loop() {
			var st ExecStartResult
			if err := dc.FromPayload(typed.Payload(), &st); err != nil {
				b.Fatal(err)
			}
			if _, err := dc.ToPayload(st.Result); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("head", func(b *testing.B) {
		for b.Loop() {
			if st, ok, err := DecodeExecStart(raw); err != nil || !ok || st.Result.ExitCode != 3 {
				b.Fatal(err, ok)
			}
		}
	})
	b.Run("parse-whole", func(b *testing.B) {
		for b.Loop() {
			var h ExecHead
			if err := dc.FromPayload(raw.Payload(), &h); err != nil || h.ExitCode != 3 {
				b.Fatal(err)
			}
		}
	})
}
