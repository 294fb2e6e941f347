import { readFileSync } from 'node:fs'
import { createServer } from 'node:net'

/** A TCP port free on loopback now, for a process the bench or a test starts. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
    server.on('error', reject)
  })
}

/** Whether `port` can be listened on, on loopback, now. */
async function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer()
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)))
  })
}

/** The first port the system gives outgoing connections (Linux's `ip_local_port_range`; 32768 where it cannot be read). */
export function ephemeralStart(read: () => string = () => readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')): number {
  try {
    const start = Number(read().trim().split(/\s+/)[0])
    return Number.isInteger(start) && start > 1024 ? start : 32768
  } catch {
    return 32768
  }
}

/**
 * A port free now that no outgoing connection will take later: below the ports the system
 * gives connections. For a listener opened long after it is chosen (a gateway's inspector, at
 * the end of a run): a port from freePort() was, half an hour of connections later, the local
 * port of one of them, and the inspector could not open.
 */
export async function portForLater(random: () => number = Math.random): Promise<number> {
  const below = ephemeralStart()
  for (let tries = 0; tries < 100; tries += 1) {
    const port = 10_000 + Math.floor(random() * Math.max(1, below - 10_000))
    if (await canListen(port)) return port
  }
  return freePort()
}
