// Drives `sandboxctl mcp` with the official MCP TypeScript client
// (@modelcontextprotocol/sdk, pinned in package.json), over stdio and over
// streamable HTTP, written from README "Use it from an agent" alone. The
// client itself validates every structured result against the tool's
// output schema. Run by tests/mcp_test.go with
//   SANDBOXCTL, TEMPORAL_ADDRESS, SANDBOX_TASK_QUEUE, REPO_URL, SANDBOX_USER
// set; prints one "ok <transport> <step>" line per step and exits non-zero
// on the first failure.
import { spawn } from 'node:child_process';
import { writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const env = { ...process.env };
const bin = env.SANDBOXCTL;
const user = env.SANDBOX_USER;
let transportName = '';

function fail(msg) {
  console.error(`FAIL ${transportName} ${msg}`);
  process.exit(1);
}
function ok(step) {
  console.log(`ok ${transportName} ${step}`);
}
function check(cond, msg) {
  if (!cond) fail(msg);
}
function textOf(res) {
  return (res.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('');
}

function bindArgs(mode, id) {
  const a = ['mcp', '--repo', env.REPO_URL, '--user', user, '--project', 'mcp', '--mode', mode];
  return mode === 'analysis' ? [...a, '--ref', 'trunk'] : [...a, '--conversation', id];
}

// connect starts `sandboxctl mcp` for a binding over the current transport.
async function connect(args) {
  const client = new Client({ name: 'sandboxcore-mcp-test', version: '1.0.0' });
  if (transportName === 'stdio') {
    const t = new StdioClientTransport({ command: bin, args, env, stderr: 'inherit' });
    await client.connect(t);
    return { client, close: () => client.close() };
  }
  const dir = mkdtempSync(join(tmpdir(), 'mcp-token-'));
  const token = 'test-token-' + Math.random().toString(36).slice(2) + '-0123456789';
  writeFileSync(join(dir, 'token'), token + '\n', { mode: 0o600 });
  const proc = spawn(bin, [...args, '--http', '127.0.0.1:0', '--token-file', join(dir, 'token')], { env, stdio: ['ignore', 'inherit', 'pipe'] });
  const url = await new Promise((resolve, reject) => {
    let buf = '';
    const timer = setTimeout(() => reject(new Error('no listening line from sandboxctl mcp: ' + buf)), 30000);
    proc.stderr.on('data', (d) => {
      buf += d;
      const m = buf.match(/serving streamable HTTP on (http:\/\/\S+)/);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    proc.on('exit', (code) => reject(new Error(`sandboxctl mcp exited ${code}: ${buf}`)));
  });
  // Without the token: refused, before anything reaches the workspace.
  const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } };
  const bare = await fetch(url, { method: 'POST', body: JSON.stringify(init), headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' } });
  check(bare.status === 401, `a request without the token got HTTP ${bare.status}, want 401`);
  const wrong = await fetch(url, { method: 'POST', body: JSON.stringify(init), headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: 'Bearer nope' } });
  check(wrong.status === 401, `a request with a wrong token got HTTP ${wrong.status}, want 401`);
  let refused = false;
  try {
    const c = new Client({ name: 'no-token', version: '1.0.0' });
    await c.connect(new StreamableHTTPClientTransport(new URL(url)));
  } catch (err) {
    refused = true;
  }
  check(refused, 'the SDK client connected without the token');
  ok('http without the token refused');
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return {
    client,
    close: async () => {
      await client.close();
      proc.kill('SIGINT');
    },
  };
}

async function call(client, name, args, opts) {
  return client.callTool({ name, arguments: args }, undefined, { timeout: 120000, ...opts });
}

async function callOK(client, name, args, opts) {
  const res = await call(client, name, args, opts);
  if (res.isError) fail(`${name} ${JSON.stringify(args).slice(0, 200)}: ${textOf(res)}`);
  check(res.structuredContent && typeof res.structuredContent === 'object', `${name}: no structuredContent`);
  check(textOf(res).length > 0, `${name}: no text content`);
  return res;
}

async function callError(client, name, args) {
  const res = await call(client, name, args);
  check(res.isError === true, `${name} ${JSON.stringify(args)}: want isError, got ${textOf(res)}`);
  const e = res.structuredContent?.error;
  check(e && e.type, `${name}: the error has no structured type: ${JSON.stringify(res.structuredContent)}`);
  return { e, text: textOf(res) };
}

async function run(name) {
  transportName = name;
  const conv = `mcp-${name}-${Date.now() % 1e9}`;

  // tools/list differs between an edit and an analysis binding.
  const edit = await connect(bindArgs('edit', conv));
  const c = edit.client;
  const { tools } = await c.listTools();
  const names = tools.map((t) => t.name).sort();
  const want = ['sandbox_exec', 'sandbox_git', 'sandbox_output', 'sandbox_overlaps', 'sandbox_search', 'sandbox_setup', 'sandbox_shell', 'sandbox_text_editor', 'sandbox_write_stdin'];
  check(JSON.stringify(names) === JSON.stringify(want), `edit tools ${names}, want ${want} (no sandbox_pr: no code host for file://)`);
  for (const t of tools) {
    check(t.inputSchema?.type === 'object' && t.outputSchema?.type === 'object', `${t.name}: input and output schemas`);
    check(t.annotations && typeof t.annotations.readOnlyHint === 'boolean', `${t.name}: annotations`);
  }
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  check(byName.sandbox_search.annotations.readOnlyHint === true && byName.sandbox_shell.annotations.readOnlyHint === false &&
    byName.sandbox_shell.annotations.destructiveHint === true && byName.sandbox_output.annotations.idempotentHint === true, 'annotations say read-only, destructive, idempotent');
  ok('tools/list edit');

  const ana = await connect(bindArgs('analysis'));
  const atools = (await ana.client.listTools()).tools;
  const anames = atools.map((t) => t.name).sort();
  check(JSON.stringify(anames) === JSON.stringify(['sandbox_git', 'sandbox_search', 'sandbox_text_editor']), `analysis tools ${anames}`);
  const aeditor = atools.find((t) => t.name === 'sandbox_text_editor');
  check(JSON.stringify(aeditor.inputSchema.properties.command.enum) === '["view"]', 'analysis editor: view only');
  check(atools.every((t) => t.annotations.readOnlyHint === true), 'analysis tools are read-only');
  const aview = await callOK(ana.client, 'sandbox_text_editor', { command: 'view', path: 'README.md' });
  check(textOf(aview).includes('     1\t# demo'), 'analysis view');
  let absent = false;
  try {
    const r = await call(ana.client, 'sandbox_shell', { command: 'true' });
    absent = r.isError === true;
  } catch (err) {
    absent = true;
  }
  check(absent, 'sandbox_shell is callable on an analysis workspace');
  await ana.close();
  ok('tools/list analysis');

  // view with a range.
  let r = await callOK(c, 'sandbox_text_editor', { command: 'view', path: 'README.md', view_range: [2, 3] });
  check(r.structuredContent.text === '     2\tline two\n     3\tline three\n', `view range: ${JSON.stringify(r.structuredContent.text)}`);
  check(r.structuredContent.lines === 5, 'view: line count');
  await callOK(c, 'sandbox_text_editor', { command: 'create', path: 'ignored.log', file_text: 'ignored by .gitignore\n' });
  r = await callOK(c, 'sandbox_text_editor', { command: 'view', path: '.' });
  check(r.structuredContent.kind === 'directory' && r.structuredContent.text.includes('README.md\n') && r.structuredContent.text.includes('src/\n') &&
    r.structuredContent.text.includes('src/main.go\n') && !r.structuredContent.text.includes('.gitignore') && !r.structuredContent.text.includes('ignored.log'),
  `view of the root: ${r.structuredContent.text}`);
  ok('view with a range');

  // str_replace then view shows the change.
  r = await callOK(c, 'sandbox_text_editor', { command: 'str_replace', path: 'README.md', old_str: 'line two', new_str: 'line 2 (edited by MCP)' });
  check(r.structuredContent.text.includes('     2\tline 2 (edited by MCP)'), `snippet: ${r.structuredContent.text}`);
  r = await callOK(c, 'sandbox_text_editor', { command: 'view', path: 'README.md', view_range: [2, 2] });
  check(r.structuredContent.text === '     2\tline 2 (edited by MCP)\n', `view after str_replace: ${r.structuredContent.text}`);
  ok('str_replace then view');

  // An old_str occurring twice is an error that says so.
  let { e, text } = await callError(c, 'sandbox_text_editor', { command: 'str_replace', path: 'README.md', old_str: 'dup', new_str: 'x' });
  check(e.type === 'InvalidArgument' && text.includes('2 times') && e.field === 'old_str', `old_str twice: ${text}`);
  ok('str_replace of an old_str occurring twice');

  // create and insert.
  await callOK(c, 'sandbox_text_editor', { command: 'create', path: 'notes/new.txt', file_text: 'a\nc\n' });
  r = await callOK(c, 'sandbox_text_editor', { command: 'insert', path: 'notes/new.txt', insert_line: 1, new_str: 'b' });
  r = await callOK(c, 'sandbox_text_editor', { command: 'view', path: 'notes/new.txt' });
  check(r.structuredContent.text === '     1\ta\n     2\tb\n     3\tc\n', `create + insert: ${r.structuredContent.text}`);
  ok('create and insert');

  // shell: a non-zero exit is a result.
  r = await callOK(c, 'sandbox_shell', { command: 'echo out; echo err >&2; exit 3' });
  check(r.isError !== true && r.structuredContent.exit_code === 3 && r.structuredContent.stdout === 'out\n' && r.structuredContent.stderr === 'err\n', `exit 3: ${JSON.stringify(r.structuredContent)}`);
  check(textOf(r).includes('exit code 3'), 'exit 3 text');
  ok('shell exit 3');

  // A 100,000-line output is cut and paged back completely.
  r = await callOK(c, 'sandbox_shell', { command: 'seq 1 100000' });
  const sc = r.structuredContent;
  let expected = '';
  for (let i = 1; i <= 100000; i++) expected += i + '\n';
  check(sc.truncated === true && sc.output_id && sc.stdout_bytes === expected.length && sc.stdout.length < 81000, `seq: ${JSON.stringify({ ...sc, stdout: sc.stdout.length })}`);
  check(sc.stdout.startsWith('1\n2\n3\n') && sc.stdout.endsWith('99999\n100000\n') && textOf(r).includes(sc.output_id), 'seq head, tail and output_id');
  let got = '';
  let offset = 0;
  let pages = 0;
  for (;;) {
    const p = await callOK(c, 'sandbox_output', { output_id: sc.output_id, offset, limit: 100000 });
    const pc = p.structuredContent;
    check(pc.offset === offset && pc.total === expected.length, `page at ${offset}: ${JSON.stringify({ ...pc, text: pc.text.length })}`);
    got += pc.text;
    offset = pc.next_offset;
    pages++;
    if (pc.eof) break;
    check(pages < 50, 'sandbox_output never reached eof');
  }
  check(got === expected, `paged output differs: ${got.length} bytes, want ${expected.length}`);
  check(pages === 6, `pages: ${pages}`);
  ok('100000 lines cut and paged back');

  // Progress notifications for a long command when the client asks.
  const progress = [];
  r = await callOK(c, 'sandbox_shell', { command: 'for i in 1 2 3; do echo tick $i; sleep 1; done' }, { onprogress: (p) => progress.push(p) });
  check(r.structuredContent.stdout === 'tick 1\ntick 2\ntick 3\n', 'progress command output');
  check(progress.length >= 1 && progress.every((p, i) => i === 0 || p.progress > progress[i - 1].progress), `progress notifications: ${JSON.stringify(progress)}`);
  ok('progress');

  // search (smart case, glob).
  r = await callOK(c, 'sandbox_search', { pattern: 'hello' });
  const paths = r.structuredContent.matches.map((m) => `${m.path}:${m.line}`);
  check(paths.includes('src/main.go:4') && r.structuredContent.ignore_case === true, `search: ${JSON.stringify(r.structuredContent)}`);
  r = await callOK(c, 'sandbox_search', { pattern: 'Hello', glob: '*.md' });
  check(r.structuredContent.matches.length === 0 && r.structuredContent.ignore_case === false, `search Hello in *.md: ${JSON.stringify(r.structuredContent)}`);
  ok('search');

  // git status, diff, commit, log.
  r = await callOK(c, 'sandbox_git', { command: 'status' });
  const files = r.structuredContent.status.files.map((f) => f.path);
  check(r.structuredContent.status.dirty === true && files.includes('README.md'), `status: ${JSON.stringify(r.structuredContent.status)}`);
  r = await callOK(c, 'sandbox_git', { command: 'diff', paths: ['README.md'] });
  check(r.structuredContent.diff.patch.includes('+line 2 (edited by MCP)') && JSON.stringify(r.structuredContent.diff.files) === '["README.md"]', `diff: ${JSON.stringify(r.structuredContent.diff)}`);
  r = await callOK(c, 'sandbox_git', { command: 'commit', message: 'agent: edit over MCP' });
  check(/^[0-9a-f]{40}$/.test(r.structuredContent.commit.commit), `commit: ${JSON.stringify(r.structuredContent)}`);
  const sha = r.structuredContent.commit.commit;
  r = await callOK(c, 'sandbox_git', { command: 'status' });
  check(r.structuredContent.status.dirty === false && r.structuredContent.status.head === sha, 'status after commit');
  r = await callOK(c, 'sandbox_git', { command: 'log', limit: 2 });
  check(r.structuredContent.log.commits[0].commit === sha && r.structuredContent.log.commits[0].subject === 'agent: edit over MCP', `log: ${JSON.stringify(r.structuredContent.log)}`);
  ok('git status diff commit log');

  // Escapes are typed errors.
  ({ e } = await callError(c, 'sandbox_text_editor', { command: 'view', path: '../../etc/passwd' }));
  check(e.type === 'InvalidWorkspacePath', `../../etc/passwd: ${JSON.stringify(e)}`);
  ({ e } = await callError(c, 'sandbox_text_editor', { command: 'view', path: 'nope.txt' }));
  check(e.type === 'FileNotFound' && e.kind === 'InvalidWorkspacePath', `missing file: ${JSON.stringify(e)}`);
  ({ e } = await callError(c, 'sandbox_output', { output_id: 'out-00000000000000000000000000000000' }));
  check(e.type === 'SandboxNotFound', `unknown output: ${JSON.stringify(e)}`);
  ({ e } = await callError(c, 'sandbox_shell', { command: 'true', timeout_s: 'soon' }));
  check(e.type === 'InvalidArgument', `bad argument type: ${JSON.stringify(e)}`);
  ok('typed errors InvalidWorkspacePath');

  await edit.close();
  ok('done');
}

const which = process.argv[2] || 'all';
try {
  if (which === 'all' || which === 'stdio') await run('stdio');
  if (which === 'all' || which === 'http') await run('http');
} catch (err) {
  fail(err?.stack || String(err));
}
process.exit(0);
