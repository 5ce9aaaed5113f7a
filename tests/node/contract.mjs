// Drives sandboxcore through the official Temporal TypeScript client, written
// from docs/API.md alone, and validates every result against the committed
// JSON Schema (docs/schema/). Run by tests/node_test.go with
//   TEMPORAL_ADDRESS, SANDBOX_TASK_QUEUE, REPO_URL, SANDBOX_USER
// set; prints one "ok <step>" line per step and exits non-zero on the first
// failure.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Client, Connection, WithStartWorkflowOperation, WorkflowUpdateFailedError } from '@temporalio/client';
import Ajv2020 from 'ajv/dist/2020.js';

const schemaDir = new URL('../../docs/schema/', import.meta.url);
const schema = JSON.parse(readFileSync(new URL('sandboxcore.schema.json', schemaDir)));
const index = JSON.parse(readFileSync(new URL('index.json', schemaDir)));
const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addSchema(schema);

function fail(msg) {
  console.error('FAIL ' + msg);
  process.exit(1);
}

// validate checks value against the definition the index names for an update's result.
function validate(update, value) {
  const ref = index.updates[update]?.result;
  if (!ref) fail(`no schema for ${update}`);
  const check = ajv.getSchema(schema.$id + ref);
  if (!check(value)) fail(`${update} result does not match ${ref}: ${ajv.errorsText(check.errors)} in ${JSON.stringify(value).slice(0, 500)}`);
}

function validateMessage(key, value) {
  const ref = index.messages[key]?.result;
  if (!ref) fail(`no schema for ${key}`);
  const check = ajv.getSchema(schema.$id + ref);
  if (!check(value)) fail(`${key} result does not match ${ref}: ${ajv.errorsText(check.errors)}`);
}

function validateErrorDetails(details) {
  const check = ajv.getSchema(schema.$id + index.errors);
  if (!check(details)) fail(`error details do not match ${index.errors}: ${ajv.errorsText(check.errors)}`);
}

// expectFailure runs fn and returns the ApplicationFailure of the update it sent.
async function expectFailure(what, fn) {
  try {
    await fn();
  } catch (err) {
    if (!(err instanceof WorkflowUpdateFailedError)) fail(`${what}: want WorkflowUpdateFailedError, got ${err}`);
    const cause = err.cause;
    if (!cause || !cause.type) fail(`${what}: the failure has no application type: ${err}`);
    return cause;
  }
  fail(`${what}: succeeded`);
}

const address = process.env.TEMPORAL_ADDRESS ?? '127.0.0.1:7233';
const taskQueue = process.env.SANDBOX_TASK_QUEUE ?? 'sandbox';
const repoUrl = process.env.REPO_URL;
const user = process.env.SANDBOX_USER ?? 'alice';
if (!repoUrl) fail('REPO_URL is not set');

// Identity (docs/API.md "Identity").
const key = `edit|${user}|p1|c42`;
const hash = createHash('sha256').update(key).digest('hex').slice(0, 24);
const workspaceId = `ws-${hash}`;
const workflowId = `sandbox-session/${hash}`;
const request = { user_id: user, project_id: 'p1', repo_url: repoUrl, mode: 'edit', conversation_id: 'c42' };
// The branch of a new edit workspace (docs/API.md "Identity"): the tenant segment is the first 16
// hex digits of sha256(user_id|project_id).
const branch = `agent/${createHash('sha256').update(`${user}|p1`).digest('hex').slice(0, 16)}/edits-c42`;

const connection = await Connection.connect({ address });
const client = new Client({ connection, namespace: 'default' });

// acquire by update-with-start (conflict policy USE_EXISTING).
const start = new WithStartWorkflowOperation('SessionWorkflow', {
  workflowId,
  taskQueue,
  args: [{ workspace_id: workspaceId, request }],
  workflowIdConflictPolicy: 'USE_EXISTING',
});
const handle = await client.workflow.executeUpdateWithStart('acquire', { args: [{ request }], startWorkflowOperation: start });
validate('acquire', handle);
if (handle.workspace_id !== workspaceId) fail(`acquire: workspace_id ${handle.workspace_id}, want ${workspaceId}`);
if (handle.branch !== branch) fail(`acquire: branch ${handle.branch}, want ${branch}`);
if (!/^\d+\.\d+\.\d+$/.test(handle.contract_version)) fail(`acquire: contract_version ${handle.contract_version}`);
console.log('ok acquire', handle.workspace_id, handle.contract_version);

const wf = client.workflow.getHandle(workflowId);
const update = async (name, arg) => {
  const out = await wf.executeUpdate(name, arg === undefined ? {} : { args: [arg] });
  validate(name, out);
  return out;
};

const ex = await update('exec', { cmd: ['sh', '-c', 'cat README.md; exit 3'] });
if (ex.exit_code !== 3) fail(`exec: exit ${ex.exit_code}`);
if (Buffer.from(ex.stdout, 'base64').toString() !== 'hello\n') fail(`exec: stdout ${ex.stdout}`);
console.log('ok exec', ex.exit_code);

const content = Buffer.from('written from TypeScript\n\u00e9\u0000\u00ff');
const wr = await update('write_file', { path: 'ts/notes.txt', content: content.toString('base64') });
if (wr.bytes !== content.length) fail(`write_file: bytes ${wr.bytes}`);
console.log('ok write_file', wr.bytes);

const rd = await update('read_file', { path: 'ts/notes.txt' });
if (!Buffer.from(rd.content, 'base64').equals(content)) fail('read_file: other bytes');
console.log('ok read_file', rd.size);

const diff = await update('diff');
if (!diff.files.includes('ts/notes.txt')) fail(`diff: files ${diff.files}`);
console.log('ok diff', diff.files.join(','));

const st = await update('status');
if (!st.dirty) fail('status: not dirty');
console.log('ok status dirty');

const commit = await update('commit', { message: 'from TypeScript' });
if (!/^[0-9a-f]{40}$/.test(commit.commit) || commit.branch !== branch) fail(`commit: ${JSON.stringify(commit)}`);
console.log('ok commit', commit.commit);

// A typed error: a path escape, with its family and kind in the details.
const escape = await expectFailure('read_file ../../etc/passwd', () => wf.executeUpdate('read_file', { args: [{ path: '../../etc/passwd' }] }));
if (escape.type !== 'InvalidWorkspacePath') fail(`path escape: type ${escape.type}`);
const [d1] = escape.details ?? [];
validateErrorDetails(d1);
if (d1.family !== 'workspace' || d1.kind !== 'InvalidWorkspacePath' || d1.retryable !== false) fail(`path escape: details ${JSON.stringify(d1)}`);
console.log('ok typed error', escape.type);

const missing = await expectFailure('read_file missing', () => wf.executeUpdate('read_file', { args: [{ path: 'no/such.txt' }] }));
const [d2] = missing.details ?? [];
validateErrorDetails(d2);
if (missing.type !== 'FileNotFound' || d2.kind !== 'InvalidWorkspacePath' || d2.sub_kind !== 'FileNotFound') fail(`missing file: ${missing.type} ${JSON.stringify(d2)}`);
console.log('ok sub-kind', d2.kind, d2.sub_kind);

// An unknown field is InvalidArgument naming it, and nothing runs.
const t0 = Date.now();
const unknown = await expectFailure('exec with timeoutS', () => wf.executeUpdate('exec', { args: [{ cmd: ['sleep', '3'], timeoutS: 1 }] }));
const [d3] = unknown.details ?? [];
validateErrorDetails(d3);
if (unknown.type !== 'InvalidArgument' || d3.field !== 'timeoutS') fail(`unknown field: ${unknown.type} ${JSON.stringify(d3)}`);
if (Date.now() - t0 > 2500) fail('unknown field: the command ran');
console.log('ok unknown field', d3.field);

const describe = await wf.query('describe');
validateMessage('SessionWorkflow/query/describe', describe);
if (describe.workspace_id !== workspaceId || describe.contract_version !== handle.contract_version) fail(`describe: ${JSON.stringify(describe).slice(0, 300)}`);
console.log('ok describe', describe.state);

await connection.close();
console.log('ok done');
