// Build step, run after `tsc`: records when and with which compiler the project was built.
import { writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { installedTypescriptVersion, recordBuild, recordedBuildUrl } from './build-info.js';

const record = recordBuild(new Date(), installedTypescriptVersion());
writeFileSync(recordedBuildUrl, JSON.stringify(record, null, 2) + '\n');
console.log(`build info: ${fileURLToPath(recordedBuildUrl)} (${record.builtAtString}, TypeScript ${record.sbtVersion})`);
