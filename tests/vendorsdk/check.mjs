// The checks the vendor SDK scripts (daytona.mjs, e2b.mjs) share: one
// "ok <step>" line per step passed, a "FAIL" line and exit status 1 on the
// first mismatch.

export function fail(msg) {
  console.error('FAIL ' + msg);
  process.exit(1);
}

export function ok(step) {
  console.log('ok ' + step);
}

export function eq(what, got, want) {
  if (got !== want) fail(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}

// rejects runs fn and returns what it threw; fails when it did not throw.
export async function rejects(what, fn) {
  try {
    await fn();
  } catch (err) {
    return err;
  }
  fail(`${what}: succeeded`);
}
