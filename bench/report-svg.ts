/** The bench's hand-written SVG chart (bench/results.svg). */

import { f2, int, label, MIB, TOOL_COLOR } from './report-format.ts';
import type { BenchResults } from './results.ts';

function escapeXml(text: string): string {
  return text.replace(
    /[<>&"]/g,
    (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;' })[c] as string,
  );
}

/** Two panels: wall time relative to raw DuckDB (with the 1.10x target), and peak RSS. */
export function renderSvg(r: BenchResults): string {
  const width = 1040;
  const left = 200;
  const panelW = 380;
  const rssX = 730;
  const rssW = 230;
  const barH = 16;
  const gap = 4;
  const groupGap = 26;
  const top = 90;
  const maxRatio = Math.max(...r.comparisons.flatMap((c) => c.tools.map((t) => t.ratioVsDuckDb)));
  // Long bars are cut at the axis end (marked), so the bars near 1.0x stay readable.
  const axisMax = Math.min(2.5, Math.max(1.5, Math.ceil(maxRatio * 4) / 4));
  const maxRss = Math.max(1, ...r.comparisons.flatMap((c) => c.tools.map((t) => t.maxRssBytes / MIB)));
  const xRatio = (v: number) => left + (Math.min(v, axisMax) / axisMax) * panelW;
  const xRss = (v: number) => rssX + (v / maxRss) * rssW;
  const parts: string[] = [];
  let y = top;
  for (const c of r.comparisons) {
    parts.push(
      `<text x="10" y="${y + 2}" font-weight="bold" font-size="13">${escapeXml(c.dataset.title)}</text>`,
    );
    y += 10;
    for (const t of c.tools) {
      const color = TOOL_COLOR[t.tool];
      const end = xRatio(t.ratioVsDuckDb);
      const cut = t.ratioVsDuckDb > axisMax;
      parts.push(
        `<text x="${left - 8}" y="${y + barH - 4}" text-anchor="end" font-size="12">${escapeXml(label(c, t.tool))}</text>`,
        `<rect x="${left}" y="${y}" width="${Math.max(1, end - left).toFixed(1)}" height="${barH}" fill="${color}"/>`,
        cut
          ? `<path d="M${(end - 10).toFixed(1)} ${y - 1} l6 ${barH + 2} M${(end - 5).toFixed(1)} ${y - 1} l6 ${barH + 2}" stroke="white" stroke-width="2"/>`
          : '',
        `<text x="${(end + 4).toFixed(1)}" y="${y + barH - 4}" font-size="11"${t.tool === 'product' ? ' font-weight="bold"' : ''}>${f2(t.ratioVsDuckDb)}x (${f2(t.wallMs / 1000)} s)</text>`,
        `<rect x="${rssX}" y="${y}" width="${Math.max(1, xRss(t.maxRssBytes / MIB) - rssX).toFixed(1)}" height="${barH}" fill="${color}" opacity="0.75"/>`,
        `<text x="${(xRss(t.maxRssBytes / MIB) + 4).toFixed(1)}" y="${y + barH - 4}" font-size="11">${int(t.maxRssBytes / MIB)}</text>`,
      );
      y += barH + gap;
    }
    y += groupGap;
  }
  const bottom = y - groupGap + 4;
  const line = (v: number, dash: string) =>
    `<line x1="${xRatio(v).toFixed(1)}" y1="${top - 8}" x2="${xRatio(v).toFixed(1)}" y2="${bottom}" stroke="#333" stroke-dasharray="${dash}"/>`;
  const ticks = [0.5, 1, 1.5, 2, 2.5]
    .filter((v) => v <= axisMax)
    .map(
      (v) =>
        `<text x="${xRatio(v).toFixed(1)}" y="${top - 12}" text-anchor="middle" font-size="10" fill="#555">${v.toFixed(1)}x</text>`,
    );
  const height = bottom + 92;
  const e = r.environment;
  return `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="Helvetica, Arial, sans-serif">
<title>Compacting one partition: wall time relative to raw DuckDB, and peak RSS, per tool and dataset</title>
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="22" font-size="16" font-weight="bold">Compacting one partition: wall time relative to raw DuckDB (lower is better), and peak RSS</text>
<text x="10" y="40" font-size="11" fill="#555">${escapeXml(`median of ${r.settings.runs} runs after a warm-up, ${r.settings.threads} threads per tool, ${e.cores} x ${e.cpu}, ${e.startedAt.slice(0, 10)}; every output verified`)}</text>
<text x="${left}" y="64" font-size="12" font-weight="bold">wall time / raw DuckDB</text>
<text x="${rssX}" y="64" font-size="12" font-weight="bold">peak RSS of the process (MiB)</text>
${ticks.join('\n')}
${line(1, '4 3')}
${line(1.1, '2 2')}
${parts.join('\n')}
<text x="${xRatio(1).toFixed(1)}" y="${bottom + 14}" text-anchor="end" font-size="11">raw DuckDB = 1.0x</text>
<text x="${(xRatio(1.1) + 4).toFixed(1)}" y="${bottom + 14}" font-size="11">1.10x target</text>
<text x="10" y="${height - 54}" font-size="11" fill="#555">blue: product (the compact Lambda's code path on the local folder store); grey: raw DuckDB COPY ... ORDER BY time; orange: nodejs-polars' best mode;</text>
<text x="10" y="${height - 40}" font-size="11" fill="#555">green: I/O floor (read every input byte, write the output's size); light green: fetch floor (copy each input to a new local file, as the product's downloads do);</text>
<text x="10" y="${height - 26}" font-size="11" fill="#555">light grey: DuckDB write only (the rows already sorted in memory, written to one ZSTD file: the writer's share of any DuckDB merge).</text>
<text x="10" y="${height - 12}" font-size="11" fill="#555">Bars past ${axisMax.toFixed(1)}x are cut (marked //).</text>
</svg>
`;
}
