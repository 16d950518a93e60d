// Loads a `report --html` page in headless chromium (playwright-core) and
// checks it: no console error or page error, no request for anything but the
// page itself, every plot rendered and not blank, the embedded JSON equal to
// `report --json`'s, and the figures shown equal to the JSON's.
//   node html_browser_check.cjs NODE_MODULES CHROMIUM PAGE.html REPORT.json SHOT.png PROFILE_DIR [WxH]
// WxH: a screenshot of the page's top at that size (tools/screenshots) rather
// than of the whole page.
'use strict';
const path = require('path');
const fs = require('fs');
const util = require('util');

const [modules, chromium, pagePath, jsonPath, shot, profile, size] = process.argv.slice(2);
const {chromium: launcher} = require(path.join(modules, 'playwright-core'));

const failures = [];
const fail = (what) => failures.push(what);

async function main() {
  fs.rmSync(profile, {recursive: true, force: true});
  const context = await launcher.launchPersistentContext(profile, {
    executablePath: chromium,
    headless: true,
    viewport: {width: 1280, height: 900},
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  try {
    const page = await context.newPage();
    const url = 'file://' + path.resolve(pagePath);
    page.on('console', (m) => { if (m.type() === 'error' || m.type() === 'warning') fail(`console ${m.type()}: ${m.text()}`); });
    page.on('pageerror', (e) => fail(`page error: ${e.message}`));
    page.on('request', (r) => { if (r.url() !== url) fail(`request outside the page: ${r.url()}`); });
    await page.goto(url);
    await page.waitForSelector('body[data-rendered]', {timeout: 60000});
    const rendered = await page.getAttribute('body', 'data-rendered');

    // the embedded JSON is report --json's
    const embedded = JSON.parse(await page.textContent('#nvmetrace-report'));
    const json = JSON.parse(fs.readFileSync(jsonPath, 'utf8'));
    if (!util.isDeepStrictEqual(embedded, json))
      fail('the embedded JSON is not report --json');
    const r = json[0];
    if (!r.groups.length)
      fail('the recording has no group');

    // every plot drawn: a canvas per plot with enough non-white pixels
    const plots = await page.$$eval('.plot', (divs) => divs.map((d) => {
      const c = d.querySelector('canvas');
      if (!c || !c.width || !c.height)
        return {cls: d.className, inked: 0};
      const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let inked = 0;
      for (let i = 0; i < px.length; i += 4)
        if (px[i + 3] > 0 && (px[i] < 200 || px[i + 1] < 200 || px[i + 2] < 200))
          inked++;
      return {cls: d.className, inked};
    }));
    if (rendered !== String(plots.length))
      fail(`data-rendered is ${rendered}, ${plots.length} plots`);
    // per group: stage bar, distribution, over time; tail bars; queue bars
    const want = r.groups.length * 3 + r.groups.filter((g) => g.tails.some((t) => t.n)).length +
                 r.groups.filter((g) => g.queues.length).length;
    if (plots.length !== want)
      fail(`${plots.length} plots, expected ${want}`);
    for (const p of plots)
      if (p.inked < 500)
        fail(`plot ${p.cls} is blank (${p.inked} inked pixels)`);

    // the figures shown are the JSON's
    const near = (text, v, what) => {
      if (Math.abs(parseFloat(text) - v) > 0.005 + 1e-9 * Math.abs(v))
        fail(`${what}: page says ${text}, JSON ${v}`);
    };
    const sections = await page.$$('section.group');
    if (sections.length !== r.groups.length)
      fail(`${sections.length} group sections, JSON ${r.groups.length}`);
    for (let i = 0; i < Math.min(sections.length, r.groups.length); i++) {
      const g = r.groups[i], s = sections[i];
      const cells = (sel) => s.$$eval(sel, (rows) => rows.map((tr) =>
        [...tr.querySelectorAll('td')].map((td) => td.textContent)));
      const stages = await cells('table.stages tbody tr');
      if (stages.length !== g.stages.length + 1)
        fail(`${g.label}: ${stages.length} stage rows, JSON ${g.stages.length} + end to end`);
      g.stages.forEach((st, j) => {
        if (!stages[j] || !stages[j][0].startsWith(st.name))
          fail(`${g.label}: stage row ${j} is ${stages[j] && stages[j][0]}, JSON ${st.name}`);
        else near(stages[j][1], st.mean_us, `${g.label} ${st.name} mean`);
      });
      near(stages[g.stages.length][1], g.latency_us.mean, `${g.label} end-to-end mean`);
      const pct = (await cells('table.percentiles tbody tr'))[0];
      near(pct[2], g.latency_us.p50, `${g.label} p50`);
      near(pct[3], g.latency_us.p99, `${g.label} p99`);
      near(pct[4], g.latency_us['p99.9'], `${g.label} p99.9`);
      const heads = await s.$$eval('p.tail-head', (ps) => ps.map((p) => p.textContent));
      const tails = g.tails.filter((t) => t.n);
      if (heads.length !== tails.length)
        fail(`${g.label}: ${heads.length} tails shown, JSON ${tails.length}`);
      tails.forEach((t, j) => {
        if (heads[j] && !heads[j].includes(`the ${t.n} commands`))
          fail(`${g.label}: tail ${t.quantile} says "${heads[j]}", JSON n ${t.n}`);
      });
      const tailRows = await cells('table.tail tbody tr');
      const wantRows = tails.flatMap((t) => [...t.stages, ...t.components]);
      if (tailRows.length !== wantRows.length)
        fail(`${g.label}: ${tailRows.length} tail rows, JSON ${wantRows.length}`);
      wantRows.forEach((tr, j) => { if (tailRows[j]) near(tailRows[j][5], tr.beyond_us, `${g.label} tail ${tr.name} beyond`); });
      const queues = await cells('table.queues tbody tr');
      if (queues.length !== g.queues.length)
        fail(`${g.label}: ${queues.length} queue rows, JSON ${g.queues.length}`);
      g.queues.forEach((q, j) => {
        if (!queues[j]) return;
        if (queues[j][1] !== String(q.n)) fail(`${g.label}: queue ${q.qid} n ${queues[j][1]}, JSON ${q.n}`);
        near(queues[j][3], q.p99_us, `${g.label} queue ${q.qid} p99`);
      });
    }
    const counts = await page.$$eval('table.counts tbody tr', (rows) => rows.map((tr) =>
      [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    const matched = counts.find((c) => c[0] === 'join' && c[1] === 'matched');
    if (!matched || matched[2] !== String(r.join.matched))
      fail(`join matched: page ${matched && matched[2]}, JSON ${r.join.matched}`);
    if (size) {
      const [width, height] = size.split('x').map(Number);
      await page.setViewportSize({width, height});
      await page.screenshot({path: shot});
    } else {
      await page.screenshot({path: shot, fullPage: true});
    }
  } finally {
    await context.close();
  }
}

main().then(() => {
  for (const f of failures)
    console.log('FAIL: ' + f);
  if (!failures.length)
    console.log(`ok: ${pagePath} (screenshot ${shot})`);
  process.exit(failures.length ? 1 : 0);
}, (e) => {
  console.log('FAIL: ' + (e && e.stack || e));
  process.exit(1);
});
