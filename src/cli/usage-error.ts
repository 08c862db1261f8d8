/** A command line that is wrong (exit code 2, with a pointer to the command's --help). */
export class UsageError extends Error {}
