/**
 * Loads a native uWebSockets.js binary, never a JS fallback. Candidates, in order: the official
 * `uWebSockets.js` (installed from GitHub by the user), the `@btc-vision/uwebsockets.js` fork, the
 * `@trufflesuite/uws-js-unofficial` fork. The binary file is required directly: the trufflesuite
 * package's own entry point silently switches to a slow pure-JS server when its binary fails.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { UwsModule } from './uws-types.js';

export type { UwsModule } from './uws-types.js';

export interface LoadedUws {
  uws: UwsModule;
  /** Package the binary came from. */
  build: string;
  /** That package's version. */
  version: string;
  /** Absolute path of the .node file. */
  binary: string;
}

export interface UwsCandidate {
  pkg: string;
  /** Directory of the binaries inside the package. */
  binaryDir: string;
}

const CANDIDATES: readonly UwsCandidate[] = [
  { pkg: 'uWebSockets.js', binaryDir: '.' },
  { pkg: '@btc-vision/uwebsockets.js', binaryDir: '.' },
  { pkg: '@trufflesuite/uws-js-unofficial', binaryDir: 'binaries' },
];

const require = createRequire(import.meta.url);
let loaded: LoadedUws | null = null;

/** The first native build that loads; cached, so every caller in the process gets the same one. */
export function loadUws(): LoadedUws {
  loaded ??= loadFirstOf(CANDIDATES);
  return loaded;
}

/** Exposed for tests: the first of `candidates` that loads, or an Error listing every attempt. */
export function loadFirstOf(
  candidates: readonly UwsCandidate[],
  binaryName = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`,
): LoadedUws {
  const failures: string[] = [];
  for (const candidate of candidates) {
    const attempt = tryCandidate(candidate, binaryName);
    if (typeof attempt === 'string') {
      failures.push(`  - ${candidate.pkg}: ${attempt}`);
      continue;
    }
    // Logged as { build, version, binary }: the native module itself is not worth serializing.
    Object.defineProperty(attempt, 'toJSON', { value: () => ({ build: attempt.build, version: attempt.version, binary: attempt.binary }) });
    return attempt;
  }
  throw new Error(
    `No native uWebSockets.js build loads on Node ${process.version} (ABI ${process.versions.modules}, ` +
      `${process.platform}-${process.arch}${glibcSuffix()}). Tried:\n${failures.join('\n')}\n` +
      'The gateway has no JS fallback server. See native-notes.md for which build supports which Node version and libc.',
  );
}

/** The loaded build, or a reason it could not be used. */
function tryCandidate(candidate: UwsCandidate, binaryName: string): LoadedUws | string {
  const dir = packageDir(candidate.pkg);
  if (dir === null) return 'not installed';
  const version = packageVersion(dir);
  const binaryDir = join(dir, candidate.binaryDir);
  const binary = join(binaryDir, binaryName);
  if (!existsSync(binary)) {
    return `v${version} ships no ${binaryName} (it has: ${shippedBinaries(binaryDir) || 'none'})`;
  }
  let uws: UwsModule;
  try {
    uws = require(binary) as UwsModule;
  } catch (err) {
    return `v${version}: ${binaryName} does not load: ${firstLine(err)}`;
  }
  if (typeof uws?.App !== 'function' || typeof uws.us_listen_socket_close !== 'function') {
    return `v${version}: ${binaryName} loaded but is not a uWebSockets.js module`;
  }
  return { uws, build: candidate.pkg, version, binary };
}

function packageDir(pkg: string): string | null {
  for (const base of require.resolve.paths(pkg) ?? []) {
    const dir = join(base, pkg);
    if (existsSync(join(dir, 'package.json'))) return dir;
  }
  return null;
}

function packageVersion(dir: string): string {
  try {
    const { version } = JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')) as { version?: unknown };
    return typeof version === 'string' ? version : 'unknown';
  } catch {
    return 'unknown';
  }
}

function shippedBinaries(dir: string): string {
  try {
    return readdirSync(dir)
      .filter((f) => f.startsWith(`uws_${process.platform}_${process.arch}_`) && f.endsWith('.node'))
      .join(', ');
  } catch {
    return '';
  }
}

function firstLine(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return message.split('\n')[0]!;
}

function glibcSuffix(): string {
  if (process.platform !== 'linux') return '';
  const header = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header;
  return header?.glibcVersionRuntime ? `, glibc ${header.glibcVersionRuntime}` : ', no glibc (musl?)';
}
