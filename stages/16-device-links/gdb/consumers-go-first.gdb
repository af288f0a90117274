# A supplier's driver unbound, one step at a time: the KUnit case
# unbinding_a_supplier_unbinds_its_consumer_first binds
# devlink-kunit-sup.1 and devlink-kunit-con.1, links the consumer to the
# supplier, and unbinds the supplier. The walkthrough stops where the
# driver core, finding the supplier busy, calls
# device_links_unbind_consumers(), and reads the supplier's consumer
# links. It stops again where that function releases the consumer's
# driver, and a third time where the supplier's own links are cleaned
# up, after its driver went: the consumer was unbound first.
#
# run: modprobe device_link_kunit; kunit-results device_links
# expect: layout: struct device_link's status at \+\d+, flags at \+\d+
# expect: unbinding devlink-kunit-sup\.1: consumer devlink-kunit-con\.1, link active, managed
# expect: releasing the driver of devlink-kunit-con\.1, called by device_links_unbind_consumers\(\), its link now supplier unbinding
# expect: cleaning up the links of devlink-kunit-sup\.1, whose driver is gone: consumer devlink-kunit-con\.1 has no driver
# expect: verdict: the consumer's driver went before its supplier's, as the link asks

python
import os

OUT = os.environ.get("LAB_OUT")
STATES = ["dormant", "available", "consumer probing", "active", "supplier unbinding"]
DL_FLAG_MANAGED = 1 << 6
seen = {}


def say(text):
    """Print, and keep in $LAB_OUT/walkthrough.txt for the chapter."""
    gdb.write(text + "\n")
    if OUT:
        with open(os.path.join(OUT, "walkthrough.txt"), "a") as f:
            f.write(text + "\n")


def value(expression):
    return int(gdb.parse_and_eval(expression))


def name(device):
    return gdb.parse_and_eval(f"((struct device *) {device})->kobj.name").string()


def offset(struct, member):
    return value(f"(unsigned long) &((struct {struct} *) 0)->{member}")


def consumer_links(dev):
    """(link, consumer) of each link on dev's list of consumers."""
    head = value(f"(unsigned long) &((struct device *) {dev})->links.consumers")
    node = value(f"(unsigned long) ((struct device *) {dev})->links.consumers.next")
    links = []
    while node != head and len(links) < 8:
        link = node - offset("device_link", "s_node")
        links.append((link, value(f"(unsigned long) ((struct device_link *) {link})->consumer")))
        node = value(f"((struct list_head *) {node})->next")
    return links


def status(link):
    return STATES[value(f"(int) ((struct device_link *) {link})->status")]


def layout():
    say(f"layout: struct device_link's status at +{offset('device_link', 'status')}, "
        f"flags at +{offset('device_link', 'flags')}")


def unbinding():
    dev = value("(unsigned long) dev")
    seen["supplier"] = dev
    link, consumer = consumer_links(dev)[0]
    seen["link"], seen["consumer"] = link, consumer
    flags = value(f"((struct device_link *) {link})->flags")
    managed = "managed" if flags & DL_FLAG_MANAGED else "stateless"
    say(f"unbinding {name(dev)}: consumer {name(consumer)}, link {status(link)}, {managed}")


def releasing():
    caller = gdb.selected_frame().older().name()
    seen["released_by"] = caller
    say(f"releasing the driver of {name(seen['consumer'])}, called by {caller}(), "
        f"its link now {status(seen['link'])}")


def cleaning():
    driver = value(f"(unsigned long) ((struct device *) {seen['consumer']})->driver")
    seen["consumer_unbound"] = driver == 0
    what = "has no driver" if driver == 0 else "is still bound"
    say(f"cleaning up the links of {name(seen['supplier'])}, whose driver is gone: "
        f"consumer {name(seen['consumer'])} {what}")


def verdict():
    if seen.get("released_by") == "device_links_unbind_consumers" and seen.get("consumer_unbound"):
        say("verdict: the consumer's driver went before its supplier's, as the link asks")
end

python layout()
break device_links_unbind_consumers if $_streq(dev->kobj.name, "devlink-kunit-sup.1")
continue
python unbinding()
delete
python gdb.execute(f"break device_release_driver_internal if dev == {seen['consumer']}")
continue
python releasing()
delete
python gdb.execute(f"break device_links_driver_cleanup if dev == {seen['supplier']}")
continue
python cleaning()
python verdict()
delete

# Let the suite finish; the guest powers off.
continue
