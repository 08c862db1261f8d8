import { readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/** The `buildInfo` object of the health report (docs/reference/builtins.md#healthcheck); every field a string. */
export interface BuildInfo {
  builtAtMillis: string;
  name: string;
  /** The runtime: `process.version` (kept under this name for clients of the original service). */
  scalaVersion: string;
  version: string;
  /** The TypeScript compiler version that built the project. */
  sbtVersion: string;
  builtAtString: string;
}

/** What the build step records; the runtime version is added when the report is made. */
export type RecordedBuild = Omit<BuildInfo, 'scalaVersion'>;

/** Written by build-info-write.ts after `tsc`, beside the compiled tree: dist/build-info.json. */
export const recordedBuildUrl = new URL('../../build-info.json', import.meta.url);

const packageJsonUrl = new URL('../../../package.json', import.meta.url);

/** `YYYY-MM-DD HH:MM:SS.mmm` in UTC. */
export function formatBuiltAt(date: Date): string {
  return date.toISOString().replace('T', ' ').replace('Z', '');
}

export function recordBuild(builtAt: Date, typescriptVersion: string): RecordedBuild {
  const pkg = JSON.parse(readFileSync(packageJsonUrl, 'utf8')) as { name: string; version: string };
  return {
    builtAtMillis: String(builtAt.getTime()),
    name: pkg.name,
    version: pkg.version,
    sbtVersion: typescriptVersion,
    builtAtString: formatBuiltAt(builtAt),
  };
}

export function installedTypescriptVersion(): string {
  const require = createRequire(import.meta.url);
  return (require('typescript/package.json') as { version: string }).version;
}

/**
 * A tree compiled with plain `tsc` (no build step) has no record: fall back to when this module was
 * compiled and the TypeScript that is installed, which is what built it.
 */
function reconstructBuild(): RecordedBuild {
  const compiledAt = statSync(fileURLToPath(import.meta.url)).mtime;
  let typescriptVersion = 'unknown';
  try {
    typescriptVersion = installedTypescriptVersion();
  } catch {
    // a production install without devDependencies
  }
  return recordBuild(compiledAt, typescriptVersion);
}

let cached: BuildInfo | undefined;

export function buildInfo(): BuildInfo {
  if (!cached) {
    let recorded: RecordedBuild;
    try {
      recorded = JSON.parse(readFileSync(recordedBuildUrl, 'utf8')) as RecordedBuild;
    } catch {
      recorded = reconstructBuild();
    }
    const { builtAtMillis, name, version, sbtVersion, builtAtString } = recorded;
    cached = { builtAtMillis, name, scalaVersion: process.version, version, sbtVersion, builtAtString };
  }
  return cached;
}
