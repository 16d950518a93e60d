// nvmetrace report --html: builds the page from the report's JSON (the
// element nvmetrace-report: what `report --json` prints) and the plots' data
// (nvmetrace-plots: distributions and latency over time), with Vega-Lite
// through vega-embed for the plots.  Every figure shown comes from the JSON
// as it is; the page only formats it.
'use strict';

(function () {
  const reports = JSON.parse(document.getElementById('nvmetrace-report').textContent);
  const plots = JSON.parse(document.getElementById('nvmetrace-plots').textContent);
  const root = document.getElementById('nvmetrace');
  const pending = [];

  // el('td', {class: 'num'}, '1.00') -> <td class="num">1.00</td>
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {}))
      e.setAttribute(k, v);
    for (const c of children)
      e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return e;
  }
  const us = (v) => Number(v).toFixed(2);
  const pct = (v) => (Number(v) * 100).toFixed(1) + ' %';
  const signed = (v) => (v >= 0 ? '+' : '') + us(v);

  // columns: [{name, num, cls}]; rows: [{cells: [...], cls}]
  function table(cls, columns, rows) {
    const head = el('tr', {}, ...columns.map((c) => el('th', c.num ? {class: 'num'} : {}, c.name)));
    const body = rows.map((r) => el('tr', r.cls ? {class: r.cls} : {},
      ...r.cells.map((v, i) => el('td', columns[i].num ? {class: 'num'} : {}, v))));
    return el('table', {class: cls}, el('thead', {}, head), el('tbody', {}, ...body));
  }

  function plot(parent, cls, spec) {
    const div = el('div', {class: 'plot ' + cls});
    parent.append(div);
    spec.$schema = 'https://vega.github.io/schema/vega-lite/v6.json';
    spec.config = Object.assign({font: 'system-ui, sans-serif', view: {stroke: null}}, spec.config);
    pending.push(vegaEmbed(div, spec, {actions: false, renderer: 'canvas'}));
  }

  const stageName = (s) => s.name + (s.merged ? ' +' : '') + (s.not_recorded ? ' *' : '');

  // The stage bar: each stage's share of the end-to-end mean, stacked.
  function stageBar(parent, g) {
    const values = g.stages.map((s, i) => ({stage: stageName(s), order: i, mean_us: s.mean_us,
                                            share: s.share}));
    plot(parent, 'stage-bar', {
      width: 900, height: 46, data: {values},
      mark: {type: 'bar', tooltip: true},
      encoding: {
        x: {field: 'mean_us', type: 'quantitative', stack: 'zero',
            title: 'mean latency (us), stacked by stage'},
        color: {field: 'stage', type: 'nominal', sort: {field: 'order'},
                legend: {orient: 'bottom', columns: 4, title: null}},
        order: {field: 'order'},
        tooltip: [{field: 'stage'}, {field: 'mean_us', format: '.2f', title: 'mean (us)'},
                  {field: 'share', format: '.1%'}],
      },
    });
  }

  function stageTable(g) {
    const rows = g.stages.map((s) => ({cells: [stageName(s), us(s.mean_us), pct(s.share),
                                               Number(s.avg_qd).toFixed(2)]}));
    const l = g.latency_us;
    rows.push({cls: 'total', cells: ['end to end', us(l.mean), pct(1),
                                     Number(g.avg_qd).toFixed(2)]});
    const t = table('stages', [{name: 'stage'}, {name: 'mean (us)', num: true},
                               {name: 'share', num: true}, {name: 'avg QD', num: true}], rows);
    const p = table('percentiles', [{name: 'end to end'}, {name: 'mean', num: true},
                                    {name: 'p50', num: true}, {name: 'p99', num: true},
                                    {name: 'p99.9', num: true}],
                    [{cells: ['latency (us)', us(l.mean), us(l.p50), us(l.p99), us(l['p99.9'])]}]);
    return [t, p];
  }

  // The distribution of the end to end and of each stage: a CDF on a log axis.
  function cdfPlot(parent, pg) {
    const values = [];
    for (const c of pg.cdf)
      for (const [x, f] of c.points)
        values.push({series: c.name, us: x, fraction: f});
    plot(parent, 'cdf', {
      width: 440, height: 280, data: {values},
      title: {text: 'distribution: end to end and per stage', fontSize: 12, fontWeight: 'normal'},
      mark: {type: 'line', interpolate: 'step-after', clip: true},
      encoding: {
        x: {field: 'us', type: 'quantitative', scale: {type: 'log'}, title: 'latency (us, log)'},
        y: {field: 'fraction', type: 'quantitative', title: 'fraction of commands at or below',
            scale: {domain: [0, 1]}},
        color: {field: 'series', type: 'nominal', sort: pg.cdf.map((c) => c.name),
                title: null, legend: {orient: 'bottom', columns: 3}},
      },
    });
  }

  // p50 and p99 of the end to end per interval.
  function overTimePlot(parent, pg, intervalS) {
    const values = [];
    for (const r of pg.over_time) {
      values.push({t: r.start_s, latency: 'p50', us: r.p50_us, n: r.n});
      values.push({t: r.start_s, latency: 'p99', us: r.p99_us, n: r.n});
    }
    plot(parent, 'over-time', {
      width: 440, height: 280, data: {values},
      title: {text: `end to end over time (per ${Number(intervalS * 1e3).toPrecision(3)} ms)`,
              fontSize: 12, fontWeight: 'normal'},
      mark: {type: 'line', point: values.length < 40, tooltip: true},
      encoding: {
        x: {field: 't', type: 'quantitative', title: 'seconds since the start'},
        y: {field: 'us', type: 'quantitative', title: 'latency (us)'},
        color: {field: 'latency', type: 'nominal', title: null, legend: {orient: 'bottom'}},
      },
    });
  }

  // Where the tail comes from: per tail, each stage's excess over its median.
  function tails(parent, g) {
    parent.append(el('h3', {}, 'Tail attribution'));
    if (!g.tails.length) {
      parent.append(el('p', {class: 'note'},
                       `${g.n} commands: too few for a p99 tail (100 or more)`));
      return;
    }
    const bars = [];
    for (const t of g.tails) {
      const name = t.quantile >= 0.999 ? 'p99.9' : 'p99';
      if (!t.n) {
        parent.append(el('p', {class: 'note tail-none'},
          `tail above ${name}: none; no command is clearly above the ${name} (${us(t.quantile_us)} us)`));
        continue;
      }
      parent.append(el('p', {class: 'note tail-head', 'data-quantile': name},
        `tail above ${name}: the ${t.n} commands (${(t.fraction * 100).toFixed(2)} %) at or above ` +
        `${us(t.threshold_us)} us (${name} ${us(t.quantile_us)}), mean ${us(t.mean_us)} us ` +
        `against a median of ${us(t.p50_us)}`));
      const rows = [];
      for (const [kind, list] of [['stage', t.stages], ['component', t.components]])
        for (const r of list) {
          rows.push({cells: [name, kind, r.name, us(r.p50_us), us(r.tail_mean_us),
                             signed(r.beyond_us), pct(r.share)]});
          if (kind === 'stage')
            bars.push({tail: name, stage: r.name, beyond_us: r.beyond_us});
        }
      parent.append(table('tail', [{name: 'tail'}, {name: 'row'}, {name: 'name'},
                                   {name: 'p50 (us)', num: true}, {name: 'tail mean (us)', num: true},
                                   {name: 'beyond (us)', num: true}, {name: 'share', num: true}],
                          rows));
    }
    if (bars.length)
      plot(parent, 'tail-bars', {
        width: 560, height: {step: 18}, data: {values: bars},
        title: {text: 'tail mean beyond the median, per stage (us)', fontSize: 12,
                fontWeight: 'normal'},
        mark: {type: 'bar', tooltip: true},
        encoding: {
          y: {field: 'tail', type: 'nominal', title: null},
          yOffset: {field: 'stage', sort: null},
          x: {field: 'beyond_us', type: 'quantitative', title: 'us beyond the median'},
          color: {field: 'stage', type: 'nominal', sort: null, title: null,
                  legend: {orient: 'bottom', columns: 4}},
        },
      });
  }

  function queues(parent, g) {
    if (!g.queues.length)
      return;
    parent.append(el('h3', {}, 'Per queue: end to end'));
    let worst = g.queues[0];
    for (const q of g.queues)
      if (q.p99_us > worst.p99_us)
        worst = q;
    const qname = (q) => (q.cntlid ? `cntlid ${q.cntlid} q${q.qid}` : `q${q.qid}`);
    const rows = g.queues.map((q) => ({cls: g.queues.length > 1 && q === worst ? 'worst' : '',
                                       cells: [qname(q), q.n, us(q.mean_us), us(q.p99_us)]}));
    parent.append(table('queues', [{name: 'queue'}, {name: 'n', num: true},
                                   {name: 'mean (us)', num: true}, {name: 'p99 (us)', num: true}],
                        rows));
    const values = g.queues.flatMap((q) => [{queue: qname(q), latency: 'mean', us: q.mean_us},
                                            {queue: qname(q), latency: 'p99', us: q.p99_us}]);
    plot(parent, 'queue-bars', {
      width: 560, height: {step: 14}, data: {values},
      mark: {type: 'bar', tooltip: true},
      encoding: {
        y: {field: 'queue', type: 'nominal', sort: null, title: null},
        yOffset: {field: 'latency'},
        x: {field: 'us', type: 'quantitative', title: 'end to end (us)'},
        color: {field: 'latency', type: 'nominal', title: null, legend: {orient: 'bottom'}},
      },
    });
  }

  function components(parent, g) {
    if (!g.components.length)
      return;
    parent.append(el('h3', {}, 'Components'));
    const rows = g.components.map((c) => ({cls: c.depth ? 'depth1' : '',
      cells: [c.name + (c.merged ? ' +' : ''), c.n, us(c.mean_us), Number(c.avg_qd).toFixed(2),
              us(c.p50_us), us(c.p99_us)]}));
    parent.append(table('components', [{name: 'component'}, {name: 'n', num: true},
                                       {name: 'mean (us)', num: true}, {name: 'avg QD', num: true},
                                       {name: 'p50 (us)', num: true}, {name: 'p99 (us)', num: true}],
                        rows));
  }

  function group(parent, g, pg, intervalS) {
    const s = el('section', {class: 'group'});
    parent.append(s);
    s.append(el('h2', {}, g.label));
    s.append(el('p', {class: 'meta'}, `${g.n} commands sampled (about ${Math.round(g.rate)} ` +
                                      `commands/s), ${g.view}; from ${g.span.from} to ${g.span.to}`));
    if (g.missing.length)
      s.append(el('p', {class: 'note warn'}, `no ${g.missing.join(', ')} record for these ` +
                    'commands: the stages on either side of it are reported together (+)'));
    if (g.stages.some((st) => st.not_recorded))
      s.append(el('p', {class: 'note'}, '* not recorded: the target side is inside this stage'));
    stageBar(s, g);
    s.append(...stageTable(g));
    const p = el('div', {class: 'plots'});
    s.append(p);
    cdfPlot(p, pg);
    overTimePlot(p, pg, intervalS);
    tails(s, g);
    queues(s, g);
    components(s, g);
  }

  // The record counts and what was left out, as the text report says them.
  function counts(parent, r) {
    parent.append(el('h3', {}, 'Records and commands'));
    const rows = [];
    for (const [k, v] of Object.entries(r.records))
      rows.push({cells: ['records', k, v]});
    for (const [k, v] of Object.entries(r.commands))
      rows.push({cells: ['commands', k, v]});
    if (r.join) {
      for (const k of ['host', 'target', 'matched', 'negative_network', 'ambiguous'])
        rows.push({cells: ['join', k, r.join[k]]});
      for (const side of ['host_unmatched', 'target_unmatched'])
        for (const [k, v] of Object.entries(r.join[side]))
          if (v)
            rows.push({cells: ['join', `${side}: ${k}`, v]});
    }
    parent.append(table('counts', [{name: ''}, {name: 'what'}, {name: 'count', num: true}], rows));
    const warn = [];
    if (r.records.lost_host || r.records.lost_target)
      warn.push(`lost: ${r.records.lost_host} host and ${r.records.lost_target} target records ` +
                '(a ring was full)');
    for (const k of ['cut_start', 'cut_end', 'lost_end', 'bios_unmatched', 'inserts_unmatched',
                     'user_unmatched'])
      if (r.commands[k])
        warn.push(`${k.replace('_', ' ')}: ${r.commands[k]} commands left out`);
    if (r.problem)
      warn.push(r.problem);
    for (const w of warn)
      parent.append(el('p', {class: 'note warn'}, w));
  }

  function report(r, p) {
    const s = el('section', {class: 'report'});
    root.append(s);
    const files = r.files ? r.files.join(', ') : r.file;
    s.append(el('p', {class: 'meta'}, `${files} (${r.role}), recorded on ${r.recorded_on}; ` +
                 `${Number(r.duration_s).toFixed(1)} s, ` +
                 (r.sample_n > 1 ? `1 of ${r.sample_n} commands sampled` : 'every command')));
    // as the text report: kIOPS and MB/s, or IOPS and kB/s where those would read 0.0
    for (const t of r.throughput) {
      const iops = t.iops >= 999.95 ? `${(t.iops / 1e3).toFixed(1)} kIOPS`
                                    : `${t.iops.toFixed(1)} IOPS`;
      const bw = t.bytes_per_s >= 999.95e3 ? `${(t.bytes_per_s / 1e6).toFixed(1)} MB/s`
                                           : `${(t.bytes_per_s / 1e3).toFixed(1)} kB/s`;
      s.append(el('p', {class: 'meta'}, `${t.op}: ${iops}, ${bw} (estimated)`));
    }
    if (!r.groups.length)
      s.append(el('p', {class: 'note warn'}, 'no command completed'));
    r.groups.forEach((g, i) => group(s, g, p.groups[i], p.interval_s));
    counts(s, r);
  }

  root.textContent = '';
  reports.forEach((r, i) => report(r, plots[i]));
  Promise.all(pending).then(
    () => { document.body.dataset.rendered = String(pending.length); },
    (e) => {
      document.body.dataset.rendered = 'error';
      root.prepend(el('p', {class: 'error'}, 'a plot failed: ' + e));
      console.error(e);
    });
})();
