import { sha256Hex } from '../middleware/api-key-auth.js';
import { UsageError } from './usage-error.js';

export const HASH_KEY_USAGE = `Usage: gateway hash-key < key.txt

Reads an API key on standard input (one trailing newline is dropped) and prints its SHA-256 digest,
for apiKeyAuth's keys[].sha256. The key itself never goes in the config.`;

export async function runHashKey(argv: string[]): Promise<number> {
  if (argv.includes('--help') || argv.includes('-h')) {
    console.log(HASH_KEY_USAGE);
    return 0;
  }
  if (argv.length > 0) throw new UsageError(`unexpected argument "${argv[0]}": the key is read on standard input, never from the command line`);
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  const key = Buffer.concat(chunks).toString('utf8').replace(/\r?\n$/, '');
  if (key === '') {
    console.error('gateway hash-key: no key on standard input');
    return 1;
  }
  console.log(sha256Hex(key));
  return 0;
}
