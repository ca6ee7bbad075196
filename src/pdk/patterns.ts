/** Matching what a client sends against what an operator configured: regexes run safely, address ranges. */
export { compileOperatorRegex, operatorRegexProblem, type OperatorRegex, type OperatorRegexOptions } from '../operator-regex.ts';
export { AddressRanges } from '../address-ranges.ts';
