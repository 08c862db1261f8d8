/**
 * Gives each upstream a readable prefix for the names it brings into the combined doc, derived from
 * its serviceLocation: `http://svc1:8081` -> `svc1_8081`, `http://10.0.0.7:8080` -> `10_0_0_7_8080`.
 */
export class NamespaceAllocator {
  private readonly taken: Set<string>;

  constructor(reserved: readonly string[]) {
    this.taken = new Set(reserved);
  }

  allocate(serviceLocation: string): string {
    const base = namespaceBase(serviceLocation);
    let name = base;
    for (let n = 2; this.taken.has(name); n++) name = `${base}_${n}`;
    this.taken.add(name);
    return name;
  }
}

function namespaceBase(serviceLocation: string): string {
  try {
    const url = new URL(serviceLocation);
    const port = url.port || (url.protocol === 'https:' ? '443' : '80');
    return `${url.hostname.replace(/^\[|\]$/g, '')}_${port}`.replace(/[^A-Za-z0-9_]+/g, '_');
  } catch {
    return serviceLocation.replace(/[^A-Za-z0-9_]+/g, '_') || 'upstream';
  }
}
