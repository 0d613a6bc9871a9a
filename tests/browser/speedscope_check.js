// Opens speedscope's own web app (the npm package's built release) in Debian's
// chromium, headless, loads each profile given on the command line through
// #profileURL= from a local HTTP server (speedscope refuses profileURL on file://), and
// checks from the page that it imported (no alert, no "Something went wrong", no page
// error) and that the expected frame names are shown in the sandwich view's table
// (the flame graph itself is drawn with WebGL on a canvas, which has no text to read).
// Saves a screenshot of the flame graph of each.
//
//   node speedscope_check.js NODE_MODULES OUTDIR FILE:PROFILE_NAME:SHOT:NAME1,NAME2... ...
// PROFILE_NAME: the profile to show (speedscope's 'n' key steps through a file's
// profiles), or '' for the first. Prints PASS/FAIL lines for tests/run.sh.
'use strict';
const http = require('http');
const fs = require('fs');
const path = require('path');
const os = require('os');

const [nodeModules, outDir, ...specs] = process.argv.slice(2);
const { chromium } = require(path.resolve(nodeModules, 'playwright-core'));
const app = path.resolve(nodeModules, 'speedscope', 'dist', 'release');
const T = '71_browser';
let failed = 0;
const pass = (n) => console.log(`PASS ${T}:${n}`);
const fail = (n, why) => { failed++; console.log(`FAIL ${T}:${n}: ${why}`); };

const files = {};
const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json',
	'.wasm': 'application/wasm', '.png': 'image/png', '.woff2': 'font/woff2' };
const server = http.createServer((req, res) => {
	const url = decodeURIComponent(req.url.split('?')[0]);
	let file;
	if (url.startsWith('/files/')) file = files[url.slice(7)];
	else file = path.join(app, path.normalize(url === '/' ? '/index.html' : url));
	if (!file || (!file.startsWith(app) && !Object.values(files).includes(file)) || !fs.existsSync(file)) {
		res.writeHead(404);
		res.end();
		return;
	}
	res.writeHead(200, { 'Content-Type': types[path.extname(file)] || 'application/octet-stream' });
	fs.createReadStream(file).pipe(res);
});

async function check(browser, port, spec) {
	const [file, profName, shot, names] = spec.split(':');
	const key = path.basename(file);
	const tag = key.replace(/[^A-Za-z0-9_.-]/g, '_');
	files[key] = path.resolve(file);
	const page = await browser.newPage();
	const problems = [];
	page.on('dialog', async (d) => { problems.push(`dialog: ${d.message()}`); await d.dismiss(); });
	page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
	page.on('console', (m) => { if (m.type() === 'error') problems.push(`console error: ${m.text()}`); });
	const base = `http://127.0.0.1:${port}/index.html#profileURL=${encodeURIComponent('/files/' + key)}`;
	try {
		// the sandwich table only renders the rows that fit: a tall window shows them all
		await page.setViewportSize({ width: 1280, height: 4000 });
		await page.goto(`${base}&view=sandwich`);
		await page.waitForFunction(() => !document.body.innerText.includes('Loading'), null, { timeout: 20000 });
		await page.waitForTimeout(500);
		if (profName) {
			// the toolbar names the profile shown; 'n' shows the next one
			for (let i = 0; i < 16 && !(await page.evaluate((n) => document.body.innerText.includes(n), profName)); i++) {
				await page.keyboard.press('n');
				await page.waitForTimeout(200);
			}
		}
		const text = await page.evaluate(() => document.body.innerText);
		if (text.includes('Something went wrong') || text.includes('Unrecognized format'))
			problems.push('speedscope shows an import error');
		if (problems.length) fail(`${tag}:imported`, problems.join('; '));
		else pass(`${tag}:imported`);
		if (profName && !text.includes(profName)) fail(`${tag}:profile`, `no profile named ${profName}`);
		else if (profName) pass(`${tag}:profile`);
		const missing = names.split(',').filter((n) => n && !text.includes(n));
		if (missing.length) fail(`${tag}:frames`, `not shown: ${missing.join(', ')}`);
		else pass(`${tag}:frames`);
		// the flame graph, for people to look at
		await page.setViewportSize({ width: 1280, height: 720 });
		await page.keyboard.press('2'); // left heavy
		await page.waitForTimeout(800);
		await page.screenshot({ path: path.join(outDir, shot) });
		pass(`${tag}:screenshot`);
	} catch (e) {
		fail(`${tag}:load`, String(e).split('\n')[0]);
	}
	await page.close();
}

(async () => {
	await new Promise((r) => server.listen(0, '127.0.0.1', r));
	const port = server.address().port;
	const userDir = fs.mkdtempSync(path.join(os.tmpdir(), 'gpubpf-chromium-'));
	let browser;
	try {
		// Debian's chromium, never a downloaded one; no network beyond this server
		// a fresh profile directory (--user-data-dir; playwright takes it this way)
		browser = await chromium.launchPersistentContext(userDir, {
			executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
			headless: true,
			viewport: { width: 1280, height: 720 },
			args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
				'--disable-background-networking', '--disable-component-update', '--disable-sync',
				// speedscope draws with WebGL: a software implementation stands in for the GPU
				'--use-angle=swiftshader', '--enable-unsafe-swiftshader'],
		});
		for (const s of specs) await check(browser, port, s);
	} catch (e) {
		fail('launch', String(e).split('\n')[0]);
	} finally {
		if (browser) await browser.close();
		server.close();
		fs.rmSync(userDir, { recursive: true, force: true });
	}
	process.exit(failed ? 1 : 0);
})();
