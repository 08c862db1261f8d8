// TLS clients for the edge tests: which certificate the gateway presents, and requests over https.
import { request } from 'node:https';
import { connect, type PeerCertificate } from 'node:tls';

/** The CN of the certificate the gateway presents for `servername` (undefined: no SNI). */
export function presented(port: number, servername: string | undefined, extra: Record<string, unknown> = {}): Promise<{ cn: string; protocol: string | null; alpn: string | false }> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, servername, rejectUnauthorized: false, ...extra }, () => {
      const cert = socket.getPeerCertificate() as PeerCertificate;
      resolve({ cn: String(cert.subject.CN), protocol: socket.getProtocol(), alpn: socket.alpnProtocol ?? false });
      socket.end();
    });
    socket.on('error', reject);
  });
}

export function httpsGet(port: number, path: string, servername: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Record<string, unknown>; body: string; cn: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, servername, headers: { host: servername, ...headers }, rejectUnauthorized: false, agent: false }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => {
        const cert = (res.socket as unknown as { getPeerCertificate(): PeerCertificate }).getPeerCertificate?.();
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body, cn: String(cert?.subject?.CN ?? '') });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

export function files(c: { certFile: string; keyFile: string }): { certFile: string; keyFile: string } {
  return { certFile: c.certFile, keyFile: c.keyFile };
}

