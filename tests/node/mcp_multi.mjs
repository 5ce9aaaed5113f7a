// Drives the multi-workspace endpoint of `sandboxctl mcp --http ADDR --multi
// --key-file FILE` with the official MCP TypeScript client
// (@modelcontextprotocol/sdk, pinned in package.json), written from README
// "Use it from an agent" alone: each workspace at <base>/<workspace id>
// with its own bearer token. Run by tests/mcp_multi_test.go with
//   MCP_BASE (http://ADDR/mcp), WS_A, WS_B, TOKEN_A, TOKEN_B, TOKEN_EXPIRED (of WS_A)
// set; prints one "ok multi <step>" line per step and exits non-zero on
// the first failure.
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const env = process.env;

function fail(msg) {
  console.error(`FAIL multi ${msg}`);
  process.exit(1);
}
function ok(step) {
  console.log(`ok multi ${step}`);
}
function check(cond, msg) {
  if (!cond) fail(msg);
}
function textOf(res) {
  return (res.content || []).filter((c) => c.type === 'text').map((c) => c.text).join('');
}

async function connect(ws, token) {
  const client = new Client({ name: 'sandboxcore-mcp-multi-test', version: '1.0.0' });
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  await client.connect(new StreamableHTTPClientTransport(new URL(`${env.MCP_BASE}/${ws}`), { requestInit: { headers } }));
  return client;
}

async function refused(ws, token) {
  try {
    const c = await connect(ws, token);
    await c.close();
  } catch (err) {
    return String(err?.message || err);
  }
  return '';
}

async function status(ws, token) {
  const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } };
  const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
  if (token) headers.authorization = `Bearer ${token}`;
  const res = await fetch(`${env.MCP_BASE}/${ws}`, { method: 'POST', body: JSON.stringify(init), headers });
  await res.body?.cancel();
  return { code: res.status, challenge: res.headers.get('www-authenticate') || '' };
}

async function main() {
  // Refusals, before anything reaches a workspace.
  let s = await status(env.WS_A, '');
  check(s.code === 401 && s.challenge.startsWith('Bearer'), `no token: HTTP ${s.code} ${s.challenge}`);
  s = await status(env.WS_A, env.TOKEN_A.slice(0, -2) + (env.TOKEN_A.endsWith('AA') ? 'BB' : 'AA'));
  check(s.code === 401 && s.challenge.includes('invalid_token'), `forged token: HTTP ${s.code} ${s.challenge}`);
  s = await status(env.WS_A, env.TOKEN_EXPIRED);
  check(s.code === 401 && s.challenge.includes('expired'), `expired token: HTTP ${s.code} ${s.challenge}`);
  s = await status(env.WS_B, env.TOKEN_A);
  check(s.code === 403 && s.challenge.includes('insufficient_scope'), `A's token on B: HTTP ${s.code} ${s.challenge}`);
  check((await refused(env.WS_A, '')) !== '', 'the SDK client connected without a token');
  check((await refused(env.WS_B, env.TOKEN_A)) !== '', "the SDK client connected to B with A's token");
  ok('refusals 401 403');

  // Each workspace through the same endpoint with its own token.
  for (const [ws, token] of [[env.WS_A, env.TOKEN_A], [env.WS_B, env.TOKEN_B]]) {
    const c = await connect(ws, token);
    const { tools } = await c.listTools();
    const names = tools.map((t) => t.name).sort();
    check(names.includes('sandbox_shell') && names.includes('sandbox_text_editor'), `${ws} tools: ${names}`);
    const r = await c.callTool({ name: 'sandbox_shell', arguments: { command: 'cat whoami.txt' } }, undefined, { timeout: 120000 });
    check(!r.isError && r.structuredContent?.exit_code === 0, `${ws} shell: ${textOf(r)}`);
    check(r.structuredContent.stdout === `${ws}\n`, `${ws} shell ran in another workspace: ${JSON.stringify(r.structuredContent.stdout)}`);
    await c.close();
  }
  ok('two workspaces one endpoint');
  ok('done');
}

try {
  await main();
} catch (err) {
  fail(err?.stack || String(err));
}
process.exit(0);
