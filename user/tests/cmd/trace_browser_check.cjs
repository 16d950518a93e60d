// Loads an `export` trace into a real trace viewer, speedscope's built web app
// (from npm, read from file://), in headless chromium (playwright-core), through
// its file input as a person would, and checks it: no console error or
// warning (speedscope warns on each slice it cannot nest) and no page error,
// no request for anything but files, a timeline with slices drawn, and the
// viewer's model equal to the file's: one profile per track named by its
// process and thread, each profile's total the sum of its outermost slices,
// and per profile the distinct slices (speedscope's frames: name and args)
// with their total times.
//   node trace_browser_check.cjs NODE_MODULES CHROMIUM TRACE.json SHOT.png PROFILE_DIR [WxH]
// WxH: the screenshot's size (the timeline of the first track); 1280x720.
'use strict';
const path = require('path');
const fs = require('fs');

const [modules, chromium, tracePath, shot, profile, size] = process.argv.slice(2);
const {chromium: launcher} = require(path.join(modules, 'playwright-core'));
const viewer = path.join(modules, 'speedscope', 'dist', 'release', 'index.html');
const [shotW, shotH] = (size || '1280x720').split('x').map(Number);

const failures = [];
const fail = (what) => failures.push(what);

// The file's model as speedscope builds it: a profile per (pid, tid) with
// slices, named "PROCESS (pid P), THREAD (tid T)"; a frame per name and args.
function expected(trace) {
  const procs = new Map(), threads = new Map(), tracks = new Map();
  for (const e of trace.traceEvents) {
    if (e.ph === 'M' && e.name === 'process_name') procs.set(e.pid, e.args.name);
    if (e.ph === 'M' && e.name === 'thread_name') threads.set(`${e.pid}:${e.tid}`, e.args.name);
    if (e.ph !== 'X') continue;
    const k = `${e.pid}:${e.tid}`;
    if (!tracks.has(k)) tracks.set(k, {pid: e.pid, tid: e.tid, slices: []});
    tracks.get(k).slices.push(e);
  }
  const out = [];
  for (const [k, t] of tracks) {
    if (!procs.has(t.pid) || !threads.has(k)) fail(`track ${k} has no process or thread name`);
    const name = `${procs.get(t.pid)} (pid ${t.pid}), ${threads.get(k)} (tid ${t.tid})`;
    // outermost slices and, per frame, the slices not inside one of the same frame
    const s = [...t.slices].sort((a, b) => a.ts - b.ts || b.dur - a.dur);
    const stack = [], frames = new Map();
    let total = 0;
    for (const e of s) {
      while (stack.length && stack[stack.length - 1].ts + stack[stack.length - 1].dur <= e.ts)
        stack.pop();
      const key = e.args ? `${e.name} ${JSON.stringify(e.args)}` : e.name;
      if (!stack.length) total += e.dur;
      if (!stack.some((o) => o.key === key))
        frames.set(key, (frames.get(key) || 0) + e.dur);
      stack.push({ts: e.ts, dur: e.dur, key});
    }
    out.push({name, slices: t.slices.length, total, frames});
  }
  return out;
}

// speedscope's "587.25ms (76%)" in us
function parseTime(text) {
  const m = /^([\d.]+)\s*(ns|µs|us|ms|s|min)/.exec(text.trim());
  if (!m) return NaN;
  return parseFloat(m[1]) * {ns: 1e-3, 'µs': 1, us: 1, ms: 1e3, s: 1e6, min: 60e6}[m[2]];
}
const near = (text, us, what) => {
  const v = parseTime(text);
  // shown with 2 decimals (3 significant digits at least)
  if (!(Math.abs(v - us) <= 0.006 * Math.abs(us) + 0.006))
    fail(`${what}: viewer shows ${text}, the file ${us.toFixed(3)} us`);
};

async function main() {
  const trace = JSON.parse(fs.readFileSync(tracePath, 'utf8'));
  const want = expected(trace);
  if (!want.length) fail('the trace has no slice');
  const rows = Math.max(...want.map((w) => w.frames.size), 0);

  fs.rmSync(profile, {recursive: true, force: true});
  const context = await launcher.launchPersistentContext(profile, {
    executablePath: chromium,
    headless: true,
    // tall enough for every frame's row of the sandwich list (20 px each)
    viewport: {width: 1280, height: Math.max(900, 200 + rows * 24)},
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    const page = await context.newPage();
    page.on('console', (m) => {
      // SwiftShader's notes on its own speed are not the viewer's
      if (/^\[\.WebGL-[0-9a-fx]+\]GL Driver Message \(OpenGL, Performance/.test(m.text())) return;
      if (m.type() === 'error' || m.type() === 'warning') fail(`console ${m.type()}: ${m.text()}`);
    });
    page.on('pageerror', (e) => fail(`page error: ${e.message}`));
    // speedscope says an import failed with alert()
    page.on('dialog', async (d) => { fail(`dialog: ${d.message()}`); await d.dismiss(); });
    page.on('request', (r) => {
      if (!/^(file|data|blob):/.test(r.url())) fail(`request outside the files: ${r.url()}`);
    });
    await page.goto('file://' + viewer);
    await page.setInputFiles('#file', tracePath);
    // the title names the file once the import is done
    try {
      await page.waitForFunction((f) => document.title === `${f} - speedscope`,
                                 path.basename(tracePath), {timeout: 30000});
    } catch (e) {
      const text = (await page.textContent('body')).replace(/\s+/g, ' ').slice(0, 300);
      fail(`the viewer did not import the file in 30 s; it shows: ${text}`);
      return;
    }

    // one profile per track, with the total of its outermost slices
    const profiles = await page.$$eval('tr[title]', (trs) => trs.map((tr) =>
      [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    if (profiles.length !== want.length)
      fail(`${profiles.length} profiles in the viewer, ${want.length} tracks in the file`);
    for (const w of want) {
      const p = profiles.find((r) => r[1] === w.name);
      if (!p) fail(`no profile "${w.name}"`);
      else near(p[2], w.total, `${w.name}: total`);
    }

    // per profile, the sandwich list: a row per frame, with its total
    const current = async () => {
      const t = await page.$$eval('span', (ss) => ss.filter((s) => /^\(\d+\/\d+\)$/.test(s.textContent))
        .map((s) => s.parentElement.textContent.slice(0, -s.textContent.length).trim()));
      return t[0];
    };
    // a key press re-renders asynchronously: wait for the sandwich list of
    // a profile other than the one shown before (a loaded machine is slow)
    const shown = (prev) => page.waitForFunction((p) => {
      const label = [...document.querySelectorAll('span')]
        .find((s) => /^\(\d+\/\d+\)$/.test(s.textContent));
      if (!label) return false;
      const name = label.parentElement.textContent.slice(0, -label.textContent.length).trim();
      const rows = [...document.querySelectorAll('table tr')]
        .filter((tr) => tr.querySelectorAll('td').length === 3 && !tr.hasAttribute('title'));
      return name !== p && rows.length > 0;
    }, prev, {timeout: 30000}).then(() => true, () => false);
    await page.keyboard.press('3');
    let frames = 0, prev = null;
    for (let i = 0; i < profiles.length; i++) {
      if (i) await page.keyboard.press('n');
      if (!(await shown(prev))) {
        fail(`profile ${i + 1}: the sandwich list was not drawn in 30 s`);
        break;
      }
      const name = await current();
      prev = name;
      const w = want.find((x) => x.name === name);
      if (!w) { fail(`profile ${i + 1} "${name}" is no track of the file`); continue; }
      const list = await page.$$eval('table tr', (trs) => trs
        .filter((tr) => tr.querySelectorAll('td').length === 3 && !tr.hasAttribute('title'))
        .map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
      if (list.length !== w.frames.size)
        fail(`${name}: ${list.length} frames in the viewer, ${w.frames.size} in the file`);
      for (const [total, , key] of list) {
        if (!w.frames.has(key)) fail(`${name}: frame "${key}" is not in the file`);
        else near(total, w.frames.get(key), `${name}: ${key}`);
      }
      frames += list.length;
    }

    // the first track's timeline, drawn: the slices' colours on the screenshot
    for (let i = 1; i < profiles.length; i++) await page.keyboard.press('p');
    await page.keyboard.press('1');
    await page.setViewportSize({width: shotW, height: shotH});
    // the flame chart is drawn on a canvas after the view changes: shoot
    // until it holds colour, for up to 30 s
    const colouredPixels = (png) => page.evaluate(async (b64) => {
      const img = new Image();
      img.src = 'data:image/png;base64,' + b64;
      await img.decode();
      const c = document.createElement('canvas');
      c.width = img.width;
      c.height = img.height;
      const g = c.getContext('2d');
      g.drawImage(img, 0, 0);
      const px = g.getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      // below the tool bar (whose view button is coloured)
      for (let i = 4 * 24 * c.width; i < px.length; i += 4)
        if (Math.max(px[i], px[i + 1], px[i + 2]) - Math.min(px[i], px[i + 1], px[i + 2]) > 24) n++;
      return n;
    }, png.toString('base64'));
    let coloured = 0;
    for (const until = Date.now() + 30000; coloured < 1000 && Date.now() < until;)
      coloured = await colouredPixels(await page.screenshot({path: shot}));
    if (coloured < 1000)
      fail(`the timeline is blank: ${coloured} coloured pixels`);
    console.log(`viewer: ${profiles.length} profiles, ${frames} frames, ` +
                `${want.reduce((n, w) => n + w.slices, 0)} slices in the file, ` +
                `${coloured} coloured pixels on the first track's timeline`);
  } finally {
    await context.close();
  }
}

main().then(() => {
  for (const f of failures)
    console.log('FAIL: ' + f);
  if (!failures.length)
    console.log(`ok: ${tracePath} in speedscope (screenshot ${shot})`);
  process.exit(failures.length ? 1 : 0);
}, (e) => {
  console.log('FAIL: ' + (e && e.stack || e));
  process.exit(1);
});
