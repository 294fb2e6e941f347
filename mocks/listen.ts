import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'

// How the stand-ins listen and stop: like the real services, they close sockets idle for
// more than 5 s; stopping drops every connection at once.

export async function listen(handler: (req: IncomingMessage, res: ServerResponse) => void, port: number, host: string): Promise<Server> {
  const server = createServer(handler)
  server.keepAliveTimeout = 5000
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve()
    })
  })
  return server
}

export async function stop(server: Server | undefined): Promise<void> {
  if (server === undefined) return
  server.closeAllConnections()
  await new Promise<void>((resolve) => server.close(() => resolve()))
}
