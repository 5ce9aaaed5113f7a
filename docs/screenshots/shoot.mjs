// Screenshots of the Temporal Web UI for docs/OPERATIONS.md, taken by
// headless Chromium (puppeteer-core, the system's /usr/bin/chromium) against
// the embedded server's UI that take.sh starts:
//
//   node shoot.mjs <ui base url> <session workflow id> <output dir>
//
// ui-sessions-list.png: the workspaces list (one row per workspace, the
// saved query of docs/OPERATIONS.md); ui-session.png: one session's page
// with its summary, details and current details.
import puppeteer from 'puppeteer-core';

const [ui, wfID, out] = process.argv.slice(2);
if (!ui || !wfID || !out) {
  console.error('usage: node shoot.mjs <ui base url> <session workflow id> <output dir>');
  process.exit(2);
}

// clickText clicks the first element of tag whose own text (or title or
// aria-label) is text.
async function clickText(page, tag, text) {
  const [el] = await page.$$(`xpath/.//${tag}[normalize-space(text())="${text}" or @title="${text}" or @aria-label="${text}"]`);
  if (!el) throw new Error(`no ${tag} "${text}"`);
  await el.click();
}

// column clicks "Add <name> column" or "Remove <name> column" in the
// table configuration drawer.
async function column(page, action, name) {
  await page.click(`#workflows-table-configuration-drawer button[aria-label="${action} ${name} column"]`);
  await new Promise((r) => setTimeout(r, 200));
}

const browser = await puppeteer.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    '--disable-component-update', '--disable-sync', '--hide-scrollbars'],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 2000, height: 900, deviceScaleFactor: 1 });

  const query = "WorkflowType = 'SessionWorkflow' AND ExecutionStatus = 'Running'";
  await page.goto(`${ui}/namespaces/default/workflows?query=${encodeURIComponent(query)}`, { waitUntil: 'networkidle0', timeout: 60000 });
  await page.waitForFunction((id) => document.body.innerText.includes(id), { timeout: 60000 }, wfID);

  // The columns of docs/OPERATIONS.md "The workspaces view", configured as
  // an operator does it: Configure Columns, remove, add.
  await clickText(page, 'button', 'Configure Columns');
  await page.waitForSelector('#workflows-table-configuration-drawer');
  for (const name of ['Run ID', 'Type', 'Start', 'End']) {
    await column(page, 'Remove', name);
  }
  for (const name of ['SandboxState', 'SandboxUser', 'SandboxProject', 'SandboxRepo', 'SandboxMode', 'SandboxBranch', 'SandboxHost', 'SandboxRuntime']) {
    await column(page, 'Add', name);
  }
  await page.click('[data-testid="drawer-close-button"]');
  await new Promise((r) => setTimeout(r, 1000));
  // Saved as the view "Workspaces" (Save as New).
  await page.evaluate(() => [...document.querySelectorAll('button')].find((b) => b.textContent.trim() === 'Save as New').click());
  await new Promise((r) => setTimeout(r, 1000));
  await page.type('input[placeholder="Name of view"]', 'Workspaces');
  await new Promise((r) => setTimeout(r, 300));
  await page.evaluate(() => [...document.querySelectorAll('button')].find((b) => b.textContent.trim() === 'Save' && b.offsetParent !== null && !b.disabled).click());
  await new Promise((r) => setTimeout(r, 1500));
  console.log('localStorage keys:', await page.evaluate(() => Object.keys(localStorage).join(', ')));
  await page.screenshot({ path: `${out}/ui-sessions-list.png` });

  // The session's page, User Metadata tab: summary, details, current details.
  const href = await page.$eval(`a[href*="${encodeURIComponent(wfID)}/"]`, (a) => a.getAttribute('href'));
  await page.goto(ui + href.replace(/\/[a-z-]+$/, '/user-metadata'), { waitUntil: 'domcontentloaded', timeout: 60000 });
  // The markdown is rendered in sandboxed frames: wait for the panel, then for them.
  await page.waitForFunction(() => document.body.innerText.includes('Current Details'), { timeout: 60000 });
  await new Promise((r) => setTimeout(r, 4000));
  await page.screenshot({ path: `${out}/ui-session.png` });
} finally {
  await browser.close();
}
