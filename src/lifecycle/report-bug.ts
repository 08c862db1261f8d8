/** A throw where none should happen (a bug of ours or of a middleware): a warning, and the worker goes on. */
export function reportBug(err: unknown): void {
  process.emitWarning(err instanceof Error ? err : new Error(String(err)), 'DataPlaneError');
}
