// Drives the Daytona stand-in (internal/runtime/daytona/daytonafake) with
// Daytona's own TypeScript SDK (the npm package @daytonaio/sdk, pinned in
// package.json): create → exec → upload/download → stop → start → delete,
// asserting what a real Daytona answers. Run by tests/vendor_sdk_test.go
// with
//   DAYTONA_API_URL, DAYTONA_API_KEY   the stand-in's API (…/api) and key
// set; prints one "ok <step>" line per step and exits non-zero with a
// "FAIL" line on the first mismatch.
//
// The SDK needs no special configuration: it takes the API URL as given and
// reaches each sandbox's toolbox at the toolboxProxyUrl the API returns.
import { createHash, randomBytes } from 'node:crypto';
import { Daytona, DaytonaNotFoundError } from '@daytonaio/sdk';
import { eq, fail, ok, rejects } from './check.mjs';

// Unset, DAYTONA_API_URL is the SDK's default (the real Daytona: make
// smoke-daytona), and DAYTONA_TARGET is 'us'.
const apiUrl = process.env.DAYTONA_API_URL || undefined;
const apiKey = process.env.DAYTONA_API_KEY;
if (!apiKey) fail('DAYTONA_API_KEY is not set');
const daytona = new Daytona({ apiUrl, apiKey, target: process.env.DAYTONA_TARGET || 'us' });
const marker = randomBytes(6).toString('hex');

// create: from the default snapshot (no resources: Daytona refuses them
// with a snapshot), with labels and environment; create waits for started.
const sbx = await daytona.create({ labels: { vendorsdk: marker }, envVars: { VENDOR_SDK: marker }, autoStopInterval: 0 }, { timeout: 120 });
eq('state after create', sbx.state, 'started');
eq('label', sbx.labels.vendorsdk, marker);
eq('auto-stop interval', sbx.autoStopInterval, 0);
const got = await daytona.get(sbx.id);
eq('get by id', got.id, sbx.id);
const listed = [];
for await (const s of daytona.list({ labels: { vendorsdk: marker } })) listed.push(s.id);
eq('sandboxes listed by label', listed.join(','), sbx.id);
ok('create');

// exec: the combined output and the exit code (a non-zero exit is a result,
// not an error), the sandbox's environment, cwd and per-command variables.
const home = await sbx.getUserHomeDir();
if (!home || !home.startsWith('/')) fail(`home directory ${JSON.stringify(home)}`);
let res = await sbx.process.executeCommand('echo "out $VENDOR_SDK"; id -un');
eq('exit code', res.exitCode, 0);
eq('output', res.result, `out ${marker}\n${sbx.user}\n`);
eq('stdout artifact', res.artifacts.stdout, res.result);
res = await sbx.process.executeCommand('pwd; echo "$EXTRA"', '/tmp', { EXTRA: 'x y' });
eq('output with cwd and env', res.result, '/tmp\nx y\n');
res = await sbx.process.executeCommand('echo partial; exit 3');
eq('exit code of exit 3', res.exitCode, 3);
eq('output of exit 3', res.result, 'partial\n');
ok('exec');

// upload/download: every byte value, both ways, checked inside the sandbox
// too; two files in one upload; a missing file is not found.
const data = Buffer.alloc(256 * 64);
for (let i = 0; i < data.length; i++) data[i] = (i * 7 + (i >> 8)) & 0xff;
const sha = createHash('sha256').update(data).digest('hex');
const path = `${home}/vendorsdk/data.bin`;
await sbx.fs.uploadFile(data, path);
res = await sbx.process.executeCommand(`sha256sum ${path} | cut -d' ' -f1; stat -c %U:%s ${path}`);
eq('sha256 and owner in the sandbox', res.result, `${sha}\n${sbx.user}:${data.length}\n`);
const back = await sbx.fs.downloadFile(path);
eq('downloaded sha256', createHash('sha256').update(back).digest('hex'), sha);
await sbx.fs.uploadFiles([
  { source: Buffer.from('one\n'), destination: `${home}/vendorsdk/one.txt` },
  { source: Buffer.from('two\n'), destination: `${home}/vendorsdk/two.txt` },
]);
const both = await sbx.fs.downloadFiles([{ source: `${home}/vendorsdk/one.txt` }, { source: `${home}/vendorsdk/two.txt` }]);
eq('downloaded files', both.map((f) => f.error ?? f.result.toString()).join(''), 'one\ntwo\n');
// A relative path and a command without cwd both start from the toolbox
// daemon's working directory.
await sbx.fs.uploadFile(Buffer.from('relative\n'), 'vendorsdk-relative.txt');
res = await sbx.process.executeCommand('cat vendorsdk-relative.txt');
eq('relative upload read without cwd', `${res.exitCode} ${res.result}`, '0 relative\n');
const err = await rejects('download a missing file', () => sbx.fs.downloadFile(`${home}/no-such-file`));
if (!/not found|no such file|does not exist/i.test(err.message)) fail(`download a missing file: ${err}`);
ok('upload/download');

// stop: stopped (its processes end, its disk stays).
await sbx.stop(60);
eq('state after stop', sbx.state, 'stopped');
await sbx.refreshData();
eq('state after stop, refreshed', sbx.state, 'stopped');
ok('stop');

// start: started again, with its files.
await sbx.start(60);
eq('state after start', sbx.state, 'started');
res = await sbx.process.executeCommand(`sha256sum ${path} | cut -d' ' -f1`);
eq('after start', res.result, `${sha}\n`);
ok('start');

// delete: gone (destroying, then not found).
await sbx.delete(60);
const deadline = Date.now() + 30_000;
for (;;) {
  const e = await daytona.get(sbx.id).then((s) => s.state, (e) => e);
  if (e instanceof DaytonaNotFoundError) break;
  if (e instanceof Error) fail(`get after delete: ${e}`);
  if (e !== 'destroying' && e !== 'destroyed') fail(`state after delete: ${e}`);
  if (Date.now() > deadline) fail('the deleted sandbox was still there after 30 s');
  await new Promise((r) => setTimeout(r, 200));
}
ok('delete');
ok('done');
