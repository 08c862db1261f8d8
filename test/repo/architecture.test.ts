// The shape of src/ the request lifecycle depends on: no import circle (a type-only one only where
// its files say why), contracts (src/exchange/) depend on nothing above them, and only the transport
// adapters (src/lifecycle/uws/) know uWS among the lifecycle's modules.
import { readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import t from 'tap';
import { REPO_ROOT as root, typeScriptFiles } from '../helpers/repo-files.js';

const src = join(root, 'src');

interface Module {
  text: string;
  imports: string[];
  typeImports: string[];
}

const modules = new Map<string, Module>();
for (const path of typeScriptFiles(src)) {
  const text = readFileSync(path, 'utf8');
  const imports: string[] = [];
  const typeImports: string[] = [];
  for (const match of text.matchAll(/^(?:import|export)(\s+type)?\s[^'"]*?from\s+'(\.[^']+)'/gm)) {
    const target = normalize(join(dirname(path), match[2]!.replace(/\.js$/, '.ts')));
    (match[1] ? typeImports : imports).push(target);
  }
  modules.set(path, { text, imports, typeImports });
}
const name = (path: string): string => relative(root, path);

function cycles(edges: (m: Module) => string[]): string[][] {
  const found: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (path: string): void => {
    state.set(path, 'open');
    stack.push(path);
    const module = modules.get(path);
    for (const next of module ? edges(module) : []) {
      if (state.get(next) === 'open') found.push(stack.slice(stack.indexOf(next)));
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(path, 'done');
  };
  for (const path of modules.keys()) if (!state.has(path)) visit(path);
  return found;
}

t.test('no module of src is in an import circle of value imports', async (t) => {
  t.same(cycles((m) => m.imports).map((c) => c.map(name)), []);
});

t.test('a type-only import circle says why in one of its files', async (t) => {
  for (const cycle of cycles((m) => [...m.imports, ...m.typeImports])) {
    const explained = cycle.some((path) => /Type-only circle/.test(modules.get(path)!.text));
    t.ok(explained, `circle ${cycle.map(name).join(' -> ')} is explained`);
  }
});

t.test('the contracts in src/exchange depend on nothing above them', async (t) => {
  const low = ['src/exchange/', 'src/routing/', 'src/http/', 'src/upstream/', 'src/native/'];
  for (const [path, module] of modules) {
    if (!name(path).startsWith('src/exchange/')) continue;
    for (const target of [...module.imports, ...module.typeImports]) {
      t.ok(low.some((prefix) => name(target).startsWith(prefix)), `${name(path)} imports ${name(target)}`);
    }
  }
});

t.test('among the lifecycle and its contracts, only the transport adapters know uWS', async (t) => {
  for (const [path, module] of modules) {
    const own = name(path);
    if (!(own.startsWith('src/lifecycle/') || own.startsWith('src/exchange/')) || own.startsWith('src/lifecycle/uws/')) continue;
    for (const target of [...module.imports, ...module.typeImports]) {
      const imported = name(target);
      t.notOk(imported.startsWith('src/native/') || imported.startsWith('src/lifecycle/uws/uws-client') , `${own} imports ${imported}`);
    }
  }
});

// Without a callback, a write to an IPC channel whose other end has just died (EPIPE, before the
// 'disconnect' event) is an 'error' event on `process`: an uncaught exception. A worker whose primary
// was killed exited so instead of draining its in-flight requests (1 run in 4 of a child sending every
// millisecond when its parent got SIGKILL; test/cluster/cluster-primary-killed.test.ts failed so under
// load). Every process.send in src/ passes one.
t.test('every process.send passes a callback', async (t) => {
  for (const [path, module] of modules) {
    for (const match of module.text.matchAll(/process\.send\??\.?\(([^;]*?)\);/gs)) {
      // A message holds data, not functions: an arrow or channelGone among the arguments is the callback.
      t.match(match[1]!, /=>|\bchannelGone\b/, `${name(path)}: process.send(${match[1]!.slice(0, 60)}...) passes a callback`);
    }
  }
});
