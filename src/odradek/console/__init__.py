"""The web console: server-rendered pages about a Kafka cluster, whose backend is a Kafka client of it.

`web.add_console(app, node)` mounts it on a node's HTTP server; `odradek console --bootstrap-server ...` runs it
on its own against any cluster (Apache Kafka too). See docs/console.md.

    web.py       the aiohttp routes, sessions and access control; `add_console`, `create_app`, `serve`
    pages.py     one handler per page: what it asks the cluster and how it lays the answer out
    cluster.py   the cluster as the console reaches it: confluent-kafka clients off the event loop, plus raw
                 requests for the APIs librdkafka has no call for (quorum, log dirs, transactions)
    sampler.py   the recent history behind the charts: log end offsets and group lag sampled every few seconds
    node_metrics.py  the nodes' own byte counters behind the bytes/s charts, read from their /metrics
    links.py     the Links pages and the cluster links' REST API (links/admin.py does the work)
    balancer.py  the Balancer page: the partition balancer's state, execution, results and load (balancer/admin.py)
    messages.py  the message browser: filters, JSON paths, how records are shown, paged bounded scans
    html.py      escaping by construction, layout, tables, pagers, forms and inline SVG charts
    session.py   signed session cookies, CSRF tokens and logins
    settings.py  how the console reaches the cluster, from the command line or from the node's listeners
    assets.py    the stylesheet and the script, served from memory (nothing from a CDN)
"""
