// Drives the E2B stand-in (internal/runtime/e2b/e2bfake) with E2B's own
// TypeScript SDK (the npm package e2b, pinned in package.json): create →
// exec → upload/download → pause → resume → kill, asserting what a real E2B
// answers. Run by tests/vendor_sdk_test.go with
//   E2B_API_URL, E2B_API_KEY   the stand-in's control plane and key
//   E2B_SANDBOX_URL            where the SDK sends the sandbox plane (envd)
//   E2B_TEMPLATE               the template to create from
// set; prints one "ok <step>" line per step and exits non-zero with a
// "FAIL" line on the first mismatch.
//
// The SDK reaches envd over https at {port}-{id}.{domain}, or, for E2B's
// own domains, at sandbox.{domain} with the sandbox named by the
// E2b-Sandbox-Id and E2b-Sandbox-Port headers. The stand-in serves plain
// HTTP on the loopback and routes by those headers, so the SDK is pointed
// at it with its apiUrl and sandboxUrl connection options (E2B_API_URL,
// E2B_SANDBOX_URL); every request still carries the headers and tokens a
// real E2B needs.
import { createHash, randomBytes } from 'node:crypto';
import { CommandExitError, NotFoundError, Sandbox, SandboxNotFoundError } from 'e2b';
import { eq, fail, ok, rejects } from './check.mjs';

// Unset, E2B_API_URL and E2B_SANDBOX_URL are the SDK's defaults (the real
// E2B: make smoke-e2b).
const opts = {
  apiUrl: process.env.E2B_API_URL || undefined,
  apiKey: process.env.E2B_API_KEY,
  sandboxUrl: process.env.E2B_SANDBOX_URL || undefined,
  requestTimeoutMs: 60_000,
};
if (!opts.apiKey) fail('E2B_API_KEY is not set');
const template = process.env.E2B_TEMPLATE ?? 'base';
const marker = randomBytes(6).toString('hex');

// create: a running sandbox of the template, with its metadata and
// environment (secure by default: envd wants the access token).
const sbx = await Sandbox.create(template, { ...opts, timeoutMs: 300_000, metadata: { vendorsdk: marker }, envs: { VENDOR_SDK: marker } });
if (!/^[a-z0-9]+$/.test(sbx.sandboxId)) fail(`sandbox id ${JSON.stringify(sbx.sandboxId)}`);
let info = await Sandbox.getInfo(sbx.sandboxId, opts);
eq('state after create', info.state, 'running');
eq('template', info.templateId, template);
eq('metadata', info.metadata.vendorsdk, marker);
if (!(info.endAt > info.startedAt)) fail(`endAt ${info.endAt} is not after startedAt ${info.startedAt}`);
ok('create');

const listed = [];
const pages = Sandbox.list({ ...opts, query: { metadata: { vendorsdk: marker } } });
while (pages.hasNext) listed.push(...(await pages.nextItems()));
eq('sandboxes listed by metadata', listed.map((s) => s.sandboxId).join(','), sbx.sandboxId);
ok('list');

// exec: stdout and stderr apart, the sandbox's environment, the exit code;
// a non-zero exit is CommandExitError carrying the result.
let res = await sbx.commands.run('echo "out $VENDOR_SDK"; echo err >&2; id -un; pwd');
eq('exit code', res.exitCode, 0);
eq('stdout', res.stdout, `out ${marker}\nuser\n/home/user\n`);
eq('stderr', res.stderr, 'err\n');
res = await sbx.commands.run('pwd; echo "$EXTRA"', { cwd: '/tmp', envs: { EXTRA: 'x y' } });
eq('stdout with cwd and envs', res.stdout, '/tmp\nx y\n');
let err = await rejects('exit 3', () => sbx.commands.run('echo partial; exit 3'));
if (!(err instanceof CommandExitError)) fail(`exit 3: want CommandExitError, got ${err}`);
eq('exit code of exit 3', err.exitCode, 3);
eq('stdout of exit 3', err.stdout, 'partial\n');
ok('exec');

// A background command keeps running; a pause must keep it (memory snapshot).
const bg = await sbx.commands.run('sleep 600', { background: true });
if (!(bg.pid > 0)) fail(`background pid ${bg.pid}`);
ok('exec background');

// upload/download: every byte value, both ways, checked inside the sandbox too.
const data = new Uint8Array(256 * 64);
for (let i = 0; i < data.length; i++) data[i] = (i * 7 + (i >> 8)) & 0xff;
const sha = createHash('sha256').update(data).digest('hex');
const path = '/home/user/vendorsdk/data.bin';
const wrote = await sbx.files.write(path, data.buffer);
eq('written path', wrote.path, path);
eq('written name', wrote.name, 'data.bin');
eq('written type', wrote.type, 'file');
res = await sbx.commands.run(`sha256sum ${path} | cut -d' ' -f1; stat -c %U:%s ${path}`);
eq('sha256 and owner in the sandbox', res.stdout, `${sha}\nuser:${data.length}\n`);
const back = await sbx.files.read(path, { format: 'bytes' });
eq('downloaded sha256', createHash('sha256').update(back).digest('hex'), sha);
// Several files in one write: each multipart part named by its whole path
// (a relative one is below the user's home).
const many = await sbx.files.write([
  { path: '/home/user/vendorsdk/deep/one.txt', data: 'one\n' },
  { path: 'vendorsdk/two.txt', data: 'two\n' },
]);
eq('paths written', many.map((w) => w.path).join(','), '/home/user/vendorsdk/deep/one.txt,/home/user/vendorsdk/two.txt');
res = await sbx.commands.run('cat vendorsdk/deep/one.txt /home/user/vendorsdk/two.txt');
eq('files written together', res.stdout, 'one\ntwo\n');
eq('read as text', await sbx.files.read('vendorsdk/two.txt'), 'two\n');
err = await rejects('read a missing file', () => sbx.files.read('/home/user/no-such-file'));
if (!(err instanceof NotFoundError)) fail(`read a missing file: want NotFoundError, got ${err}`);
ok('upload/download');

// pause: the sandbox is paused; pausing again says it already was.
eq('pause', await sbx.pause(), true);
info = await Sandbox.getInfo(sbx.sandboxId, opts);
eq('state after pause', info.state, 'paused');
eq('pause of a paused sandbox', await Sandbox.pause(sbx.sandboxId, opts), false);
ok('pause');

// resume: connect resumes it with its processes and files.
const again = await Sandbox.connect(sbx.sandboxId, { ...opts, timeoutMs: 300_000 });
info = await again.getInfo();
eq('state after connect', info.state, 'running');
res = await again.commands.run(`kill -0 ${bg.pid} && echo alive; sha256sum ${path} | cut -d' ' -f1`);
eq('after resume', res.stdout, `alive\n${sha}\n`);
eq('isRunning', await again.isRunning(), true);
ok('resume');

// kill: gone; a second kill says so; getInfo is not found.
eq('kill of the background command', await again.commands.kill(bg.pid), true);
await again.kill();
eq('kill of a killed sandbox', await Sandbox.kill(sbx.sandboxId, opts), false);
err = await rejects('getInfo of a killed sandbox', () => Sandbox.getInfo(sbx.sandboxId, opts));
if (!(err instanceof SandboxNotFoundError)) fail(`getInfo of a killed sandbox: want SandboxNotFoundError, got ${err}`);
ok('kill');
ok('done');
