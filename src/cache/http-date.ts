/**
 * HTTP-date (RFC 9110 5.6.7), read strictly: IMF-fixdate, and the obsolete RFC 850 and asctime forms a
 * recipient must also accept. Date.parse is not used: it accepts many texts that are not HTTP dates
 * (which a cache must read as invalid, i.e. already expired for Expires).
 *
 * RFC 850's two-digit year: a year that would be more than 50 years in the future is the most recent
 * past year with the same last two digits.
 */
const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const DAYS = ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'];
const LONG_DAYS = ['monday', 'tuesday', 'wednesday', 'thursday', 'friday', 'saturday', 'sunday'];

// Sun, 06 Nov 1994 08:49:37 GMT
const IMF = /^([A-Za-z]{3}), (\d{2}) ([A-Za-z]{3}) (\d{4}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
// Sunday, 06-Nov-94 08:49:37 GMT
const RFC850 = /^([A-Za-z]{6,9}), (\d{2})-([A-Za-z]{3})-(\d{2}) (\d{2}):(\d{2}):(\d{2}) GMT$/;
// Sun Nov  6 08:49:37 1994
const ASCTIME = /^([A-Za-z]{3}) ([A-Za-z]{3}) ([ \d]\d) (\d{2}):(\d{2}):(\d{2}) (\d{4})$/;

/** Epoch ms of an HTTP-date, or null when `text` is not one. `now` decides RFC 850's century. */
export function parseHttpDate(text: string, now = Date.now()): number | null {
  const value = text.trim();
  let m = IMF.exec(value);
  if (m !== null) {
    if (!DAYS.includes(m[1]!.toLowerCase())) return null;
    return build(Number(m[4]!), m[3]!, Number(m[2]!), m[5]!, m[6]!, m[7]!);
  }
  m = RFC850.exec(value);
  if (m !== null) {
    if (!LONG_DAYS.includes(m[1]!.toLowerCase())) return null;
    const currentYear = new Date(now).getUTCFullYear();
    let year = Math.floor(currentYear / 100) * 100 + Number(m[4]!);
    if (year > currentYear + 50) year -= 100;
    return build(year, m[3]!, Number(m[2]!), m[5]!, m[6]!, m[7]!);
  }
  m = ASCTIME.exec(value);
  if (m !== null) {
    if (!DAYS.includes(m[1]!.toLowerCase())) return null;
    return build(Number(m[7]!), m[2]!, Number(m[3]!.trim()), m[4]!, m[5]!, m[6]!);
  }
  return null;
}

function build(year: number, monthName: string, day: number, hh: string, mm: string, ss: string): number | null {
  const month = MONTHS.indexOf(monthName.toLowerCase());
  const hours = Number(hh);
  const minutes = Number(mm);
  const seconds = Number(ss);
  if (month < 0 || day < 1 || day > 31 || hours > 23 || minutes > 59 || seconds > 60) return null;
  const ms = Date.UTC(year, month, day, hours, minutes, Math.min(seconds, 59));
  // Reject days past the month's end (31 Feb) instead of rolling over.
  if (new Date(ms).getUTCDate() !== day) return null;
  return ms;
}

/** IMF-fixdate of epoch ms. */
export function formatHttpDate(ms: number): string {
  return new Date(ms).toUTCString();
}
