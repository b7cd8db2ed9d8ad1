#!/usr/bin/env python3
"""Makes the shared harness's fixed translation one a translator of audit format 4 writes.

The harness's translators answer from nginx with premises as bare SMT-LIB strings. Since
audit format 4 a premise must cite the user, system or tool turn that stated it ("(turn 1)" at
the end of its natural language), or it is checked as a claim: those bare premises would make
every answer SATISFIABLE and send the local-validator row round the rewriting loop. Here each
becomes {"logic": ..., "naturalLanguage": "(turn 1)"}: the benchmark's one question is turn 1.
    bench/cite-turn-one.py NGINX_CONF     (rewritten in place)
"""
import re
import sys

path = sys.argv[1]
text = open(path).read()
# Inside the nginx string the reply's quotes are written \\" (a backslash for nginx, one for JSON).
q = '\\\\"'
lists = re.compile(re.escape(q + 'premises' + q + ': [') + r'([^\]]*)\]')


def cite(match):
    items = re.findall(re.escape(q) + r'(.*?)' + re.escape(q), match.group(1))
    objects = ', '.join(
        '{%slogic%s: %s%s%s, %snaturalLanguage%s: %s(turn 1)%s}' % (q, q, q, i, q, q, q, q, q)
        for i in items
    )
    return q + 'premises' + q + ': [' + objects + ']'


new, n = lists.subn(cite, text)
if n == 0:
    sys.exit(f"{path}: no bare premises list found; the harness's translation changed")
open(path, 'w').write(new)
