import { useEffect, useRef, useState } from 'preact/hooks'
import uPlot from 'uplot'
import 'uplot/dist/uPlot.min.css'
import { call } from './api'
import { Alert, Empty, Heading, Loading, sentenceOf, useLoad } from './ui'

const CLASSES = ['2xx', '3xx', '4xx', '429', '5xx'] as const
type Counts = Record<(typeof CLASSES)[number] | 'total', number>

export interface Usage {
  days: number
  from: string
  to: string
  rows: ({ date: string; route: string } & Counts)[]
  totals: Counts
}

const COLOURS: Record<(typeof CLASSES)[number], string> = { '2xx': '#1b7f3b', '3xx': '#1f5fa8', '4xx': '#b35900', '429': '#7a3db8', '5xx': '#b3261e' }

function daysOf(usage: Usage): string[] {
  const days: string[] = []
  for (let at = Date.parse(`${usage.from}T00:00:00Z`); at <= Date.parse(`${usage.to}T00:00:00Z`); at += 86_400_000) days.push(new Date(at).toISOString().slice(0, 10))
  return days
}

function perDay(usage: Usage): Map<string, Counts> {
  const zero = (): Counts => ({ '2xx': 0, '3xx': 0, '4xx': 0, '429': 0, '5xx': 0, total: 0 })
  const byDay = new Map(daysOf(usage).map((day) => [day, zero()]))
  for (const row of usage.rows) {
    const day = byDay.get(row.date)
    if (day === undefined) continue
    for (const key of [...CLASSES, 'total'] as const) day[key] += row[key]
  }
  return byDay
}

/** The chart: one line per status class. The table below holds the same figures for every reader. */
function Chart({ usage }: { usage: Usage }) {
  const box = useRef<HTMLDivElement>(null)
  useEffect(() => {
    if (box.current === null) return
    const days = perDay(usage)
    const x = [...days.keys()].map((day) => Date.parse(`${day}T00:00:00Z`) / 1000)
    const data: uPlot.AlignedData = [x, ...CLASSES.map((c) => [...days.values()].map((d) => d[c]))]
    const plot = new uPlot({
      width: Math.min(860, box.current.clientWidth || 860),
      height: 260,
      tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
      series: [{ label: 'Day (UTC)' }, ...CLASSES.map((c) => ({ label: c, stroke: COLOURS[c], width: 2 }))],
      axes: [{}, { label: 'Requests' }],
    }, data, box.current)
    return () => plot.destroy()
  }, [usage])
  return <figure><div ref={box} class="chart" role="img" aria-label="Requests per day over the last 30 days by status class; the table below gives the figures" /></figure>
}

export function UsageScreen() {
  const usage = useLoad(async () => (await call<Usage>('GET', '/portal/api/usage')).data)
  const [day, setDay] = useState<string | undefined>()
  const u = usage.data
  const chosen = day ?? u?.to
  return (
    <section aria-labelledby="screen-title">
      <Heading>Usage</Heading>
      {usage.error === undefined ? null : <Alert>{sentenceOf(usage.error)}</Alert>}
      {u === undefined ? (usage.error === undefined ? <Loading /> : null) : (
        <>
          <p>Requests per UTC day from {u.from} to {u.to}: {u.totals.total} in all. Counts reach this page within a minute.</p>
          {u.totals.total === 0 ? <Empty>No requests in the last 30 days. Calls made with this credential appear here, counted by day and status.</Empty> : <Chart usage={u} />}
          <table>
            <caption>Requests per day by status class</caption>
            <thead><tr><th scope="col">Day</th>{CLASSES.map((c) => <th scope="col" key={c}>{c}</th>)}<th scope="col">Total</th></tr></thead>
            <tbody>
              {[...perDay(u)].reverse().filter(([, c]) => c.total > 0).map(([date, c]) => (
                <tr key={date}><th scope="row">{date}</th>{CLASSES.map((k) => <td key={k}>{c[k]}</td>)}<td>{c.total}</td></tr>
              ))}
            </tbody>
          </table>
          <h2>Per route</h2>
          <label for="usage-day">Day</label>{' '}
          <select id="usage-day" value={chosen} onChange={(e) => setDay((e.target as HTMLSelectElement).value)}>
            {daysOf(u).reverse().map((d) => <option key={d} value={d}>{d}</option>)}
          </select>
          {u.rows.some((row) => row.date === chosen) ? (
            <table>
              <caption>Requests on {chosen} per route</caption>
              <thead><tr><th scope="col">Route</th>{CLASSES.map((c) => <th scope="col" key={c}>{c}</th>)}<th scope="col">Total</th></tr></thead>
              <tbody>
                {u.rows.filter((row) => row.date === chosen).map((row) => (
                  <tr key={row.route}><th scope="row"><code>{row.route}</code></th>{CLASSES.map((k) => <td key={k}>{row[k]}</td>)}<td>{row.total}</td></tr>
                ))}
              </tbody>
            </table>
          ) : <Empty>No requests on {chosen}. Choose another day.</Empty>}
        </>
      )}
    </section>
  )
}
