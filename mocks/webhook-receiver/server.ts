import type { IncomingMessage, Server, ServerResponse } from 'node:http'
import { pathToFileURL } from 'node:url'
import { Webhook } from 'standardwebhooks'
import { listen, stop } from '../listen.js'

// A partner's webhook endpoint, for the demo and for trying webhooks by hand: it verifies each
// delivery's signature with the `standardwebhooks` package (code we did not write), prints
// one line per delivery (the event's id, type and object, or why it was refused), and answers
// 204, or 400 to a delivery it cannot verify.

export interface ReceivedDelivery {
  verified: boolean
  webhookId: string | undefined
  event: Record<string, unknown> | undefined
  reason?: string
}

export class MockWebhookReceiver {
  readonly received: ReceivedDelivery[] = []
  private server: Server | undefined
  url = ''

  /** `secrets`: the endpoint's `whsec_…` secrets (two during a rotation); a delivery passes with any. */
  constructor(private secrets: string[] = [], private readonly print: (line: string) => void = (line) => console.log(line)) {}

  /** The secret the gateway showed when the endpoint was made (or rotated). */
  addSecret(secret: string): void {
    this.secrets = [secret, ...this.secrets]
  }

  private handle(req: IncomingMessage, res: ServerResponse, body: string): void {
    const headers: Record<string, string> = {}
    for (const [name, value] of Object.entries(req.headers)) if (typeof value === 'string') headers[name] = value
    const webhookId = headers['webhook-id']
    let event: Record<string, unknown> | undefined
    let reason = this.secrets.length === 0 ? 'no secret given' : 'signature not verified'
    for (const secret of this.secrets) {
      try {
        event = new Webhook(secret).verify(body, headers) as Record<string, unknown>
        break
      } catch (error) {
        reason = (error as Error).message
      }
    }
    if (event === undefined) {
      this.received.push({ verified: false, webhookId, event: undefined, reason })
      this.print(`webhook refused: ${webhookId ?? '(no webhook-id)'}: ${reason}`)
      res.writeHead(400).end()
      return
    }
    this.received.push({ verified: true, webhookId, event })
    const object = event.object as { type?: string; id?: string } | undefined
    this.print(`webhook verified: ${String(event.id)} ${String(event.type)} ${object?.type ?? ''} ${object?.id ?? ''} (attempt at ${headers['webhook-timestamp'] ?? '?'})`)
    res.writeHead(204).end()
  }

  async listen(port = 0, host = '127.0.0.1'): Promise<this> {
    this.server = await listen((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (chunk: Buffer) => chunks.push(chunk))
      req.on('end', () => this.handle(req, res, Buffer.concat(chunks).toString('utf8')))
    }, port, host)
    this.url = `http://${host}:${(this.server.address() as { port: number }).port}`
    return this
  }

  close(): Promise<void> {
    return stop(this.server)
  }
}

// `npm run mock-webhook-receiver`: MOCK_WEBHOOK_PORT (4040), MOCK_WEBHOOK_HOST (127.0.0.1), and
// WEBHOOK_SECRET, the `whsec_…` secret the gateway showed when the endpoint was made (several,
// comma-separated, during a rotation).
if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const secrets = (process.env.WEBHOOK_SECRET ?? '').split(',').map((s) => s.trim()).filter((s) => s !== '')
  const receiver = await new MockWebhookReceiver(secrets).listen(Number(process.env.MOCK_WEBHOOK_PORT ?? 4040), process.env.MOCK_WEBHOOK_HOST ?? '127.0.0.1')
  console.log(`stand-in webhook receiver: ${receiver.url}${secrets.length === 0 ? ' (no WEBHOOK_SECRET: every delivery is refused)' : ''}`)
  const stopAll = (): void => void receiver.close().then(() => process.exit(0))
  process.on('SIGTERM', stopAll)
  process.on('SIGINT', stopAll)
}
